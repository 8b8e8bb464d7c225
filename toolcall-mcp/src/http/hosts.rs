//! Against DNS rebinding: the hosts a request may name, and the browser
//! origins it may come from.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::http::header::{HOST, HeaderValue, ORIGIN};
use axum::http::uri::Authority;
use axum::response::Response;

use super::answers::refuse;
use crate::Error;

/// The hosts a request may name in its `Host` header by default: the
/// loopback names, at any port.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// An origin or host as compared: lowercase scheme and host (no brackets),
/// and the port (the scheme's default when none is written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Origin {
    scheme: String,
    host: String,
    port: u16,
}

fn parse_origin(text: &str) -> Option<Origin> {
    let (scheme, rest) = text.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let authority = Authority::try_from(rest).ok()?;
    if authority.as_str().contains('@') {
        return None;
    }
    Some(Origin {
        scheme,
        host: bare_host(authority.host()),
        port: authority.port_u16().unwrap_or(default_port),
    })
}

fn bare_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// An allowed `Host`: a name, at any port or at one.
#[derive(Clone, Debug)]
pub(super) struct AllowedHost {
    host: String,
    port: Option<u16>,
}

fn parse_allowed_host(text: &str) -> Option<AllowedHost> {
    let authority = Authority::try_from(text).ok()?;
    if authority.as_str().contains('@') {
        return None;
    }
    Some(AllowedHost {
        host: bare_host(authority.host()),
        port: authority.port_u16(),
    })
}

/// The hosts a request may name: the loopback names, and `extra` (each a
/// host or host:port).
pub(super) fn allowed_hosts(extra: &[String]) -> Result<Vec<AllowedHost>, Error> {
    Ok(LOOPBACK_HOSTS
        .iter()
        .map(|host| AllowedHost {
            host: (*host).to_owned(),
            port: None,
        })
        .chain(
            extra
                .iter()
                .map(|text| {
                    parse_allowed_host(text).ok_or_else(|| {
                        Error(format!(
                            "the allowed host {text:?} is not a host or host:port"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        )
        .collect())
}

/// The browser origins a request may come from, besides the server's own
/// on a loopback host.
pub(super) fn allowed_origins(origins: &[String]) -> Result<Vec<Origin>, Error> {
    origins
        .iter()
        .map(|text| {
            parse_origin(text).ok_or_else(|| {
                Error(format!(
                    "the allowed origin {text:?} is not scheme://host[:port] (http or https)"
                ))
            })
        })
        .collect()
}

/// Against DNS rebinding: the host the request names, and the browser
/// origin it comes from, checked before anything else.
pub(super) fn check_host(
    hosts: &[AllowedHost],
    origins: &[Origin],
    request: &Request,
) -> Result<(), Box<Response>> {
    let Some(host) = request_host(request) else {
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: the Host header is not allowed",
        )));
    };
    if !hosts.iter().any(|allowed| {
        allowed.host == host.host && allowed.port.is_none_or(|port| Some(port) == host.port)
    }) {
        tracing::warn!("refused a request naming a host that is not allowed");
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: the Host header is not allowed",
        )));
    }
    if let Some(origin) = request.headers().get(ORIGIN)
        && !origin_allowed(origins, &host, origin)
    {
        tracing::warn!("refused a request from a browser origin that is not allowed");
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: the Origin is not allowed",
        )));
    }
    Ok(())
}

/// The request's host, from `Host` (or the URI's authority, in HTTP/2).
fn request_host(request: &Request) -> Option<AllowedHost> {
    match request.headers().get(HOST) {
        Some(host) => parse_allowed_host(host.to_str().ok()?),
        None => {
            let authority = request.uri().authority()?;
            Some(AllowedHost {
                host: bare_host(authority.host()),
                port: authority.port_u16(),
            })
        }
    }
}

/// Whether a request naming `host` may come from the browser origin
/// `origin`: one allowed, or the server's own on a loopback host (any
/// loopback name, the port of `host`).
fn origin_allowed(allowed: &[Origin], host: &AllowedHost, origin: &HeaderValue) -> bool {
    let Some(origin) = origin.to_str().ok().and_then(parse_origin) else {
        return false;
    };
    if allowed.contains(&origin) {
        return true;
    }
    let loopback = |name: &str| LOOPBACK_HOSTS.contains(&name);
    origin.scheme == "http"
        && loopback(&origin.host)
        && loopback(&host.host)
        && Some(origin.port) == Some(host.port.unwrap_or(80))
}
