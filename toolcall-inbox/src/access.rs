//! Who may use the inbox: one secret token per person, a cookie derived
//! from it once signed in, and a CSRF token derived from it for every form.

use std::fmt;
use std::path::Path;

use sha2::{Digest as _, Sha256};

/// The shortest token the inbox accepts: 16 characters. A generated one has 64.
pub const MIN_TOKEN_LEN: usize = 16;

/// The name of a person whose token file line gives none, and of the
/// person a generated token signs in.
pub const DEFAULT_NAME: &str = "operator";

/// The cookie that keeps a browser signed in.
pub(crate) const COOKIE: &str = "toolcall_inbox";

/// One person who may decide: a name (recorded with every decision) and a
/// secret token.
#[derive(Clone)]
pub struct User {
    name: String,
    token: String,
    cookie: String,
    csrf: String,
}

impl fmt::Debug for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the token.
        f.debug_struct("User")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl User {
    fn new(name: &str, token: &str) -> Self {
        User {
            name: name.to_owned(),
            token: token.to_owned(),
            cookie: derive("cookie", token),
            csrf: derive("csrf", token),
        }
    }

    /// The person's name, as decisions record it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The token that signs this person in.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The value of the sign-in cookie (derived from the token, so the
    /// cookie never carries the token itself).
    pub(crate) fn cookie(&self) -> &str {
        &self.cookie
    }

    /// The CSRF token every form of this person carries.
    pub(crate) fn csrf(&self) -> &str {
        &self.csrf
    }
}

/// The people who may sign in.
#[derive(Clone, Debug)]
pub struct Access {
    users: Vec<User>,
}

/// A token file or token that cannot be used.
#[derive(Debug)]
pub struct AccessError(String);

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AccessError {}

impl Access {
    /// One person, `name`, with this token (at least [`MIN_TOKEN_LEN`]
    /// characters, no whitespace).
    pub fn token(name: &str, token: &str) -> Result<Self, AccessError> {
        check_token(token)?;
        Ok(Access {
            users: vec![User::new(name, token)],
        })
    }

    /// One person, `name`, with a new random token of 256 bits.
    pub fn generate(name: &str) -> Result<Self, AccessError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| AccessError(format!("no randomness for a token: {e}")))?;
        Access::token(name, &hex(&bytes))
    }

    /// The people of a token file: a line a person, `NAME TOKEN`, or only
    /// `TOKEN` (named `default_name`); blank lines and lines starting with
    /// `#` are skipped. A token shorter than [`MIN_TOKEN_LEN`], a token or a
    /// name given twice, or a file with no token is an error.
    pub fn from_file(path: &Path, default_name: &str) -> Result<Self, AccessError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| AccessError(format!("cannot read {}: {e}", path.display())))?;
        Access::parse(&text, default_name)
            .map_err(|AccessError(e)| AccessError(format!("{}: {e}", path.display())))
    }

    /// [`from_file`](Self::from_file)'s reading of a file's text.
    pub fn parse(text: &str, default_name: &str) -> Result<Self, AccessError> {
        let mut users: Vec<User> = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let (name, token) = match words.as_slice() {
                [token] => (default_name, *token),
                [name, token] => (*name, *token),
                _ => {
                    return Err(AccessError(format!(
                        "line {}: expected `TOKEN` or `NAME TOKEN`",
                        number + 1
                    )));
                }
            };
            check_token(token)
                .map_err(|AccessError(e)| AccessError(format!("line {}: {e}", number + 1)))?;
            if users.iter().any(|u| u.name == name || u.token == token) {
                return Err(AccessError(format!(
                    "line {}: a name or a token given twice",
                    number + 1
                )));
            }
            users.push(User::new(name, token));
        }
        if users.is_empty() {
            return Err(AccessError("no token in the file".into()));
        }
        Ok(Access { users })
    }

    /// The people, in the order given.
    pub fn users(&self) -> &[User] {
        &self.users
    }

    /// The person whose token this is.
    pub(crate) fn by_token(&self, token: &str) -> Option<&User> {
        self.users
            .iter()
            .find(|user| same(user.token.as_bytes(), token.as_bytes()))
    }

    /// The person whose sign-in cookie this is.
    pub(crate) fn by_cookie(&self, cookie: &str) -> Option<&User> {
        self.users
            .iter()
            .find(|user| same(user.cookie.as_bytes(), cookie.as_bytes()))
    }
}

fn check_token(token: &str) -> Result<(), AccessError> {
    if token.chars().count() < MIN_TOKEN_LEN {
        return Err(AccessError(format!(
            "a token needs at least {MIN_TOKEN_LEN} characters"
        )));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(AccessError(
            "a token has no spaces or control characters".into(),
        ));
    }
    Ok(())
}

/// Hex SHA-256 of a purpose and the token: a value that proves the token
/// without being it.
fn derive(purpose: &str, token: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"toolcall-inbox\0");
    hasher.update(purpose.as_bytes());
    hasher.update(b"\0");
    hasher.update(token.as_bytes());
    hex(&hasher.finalize())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares in time independent of where the inputs differ (their
/// lengths are not secret: every token-derived value has a fixed length).
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_file_names_its_people() {
        let access = Access::parse(
            "# the team\nana 0123456789abcdef0123\n\nbo  fedcba9876543210fedc\n",
            "x",
        )
        .unwrap();
        let names: Vec<&str> = access.users().iter().map(User::name).collect();
        assert_eq!(names, ["ana", "bo"]);
        assert_eq!(
            access.by_token("fedcba9876543210fedc").unwrap().name(),
            "bo"
        );
        assert!(access.by_token("fedcba9876543210fedd").is_none());
        let single = Access::parse("0123456789abcdef0123\n", "operator").unwrap();
        assert_eq!(single.users()[0].name(), "operator");
    }

    #[test]
    fn short_repeated_or_missing_tokens_are_refused() {
        for text in [
            "",
            "# only a comment",
            "short",
            "ana 0123456789abcdef0123\nbo 0123456789abcdef0123",
            "ana 0123456789abcdef0123\nana 0123456789abcdef9999",
            "a b c",
        ] {
            assert!(Access::parse(text, "x").is_err(), "{text:?}");
        }
        assert!(Access::token("x", "0123456789abcdef").is_ok());
        assert!(Access::token("x", "0123456789abcde").is_err());
    }

    #[test]
    fn the_cookie_and_the_csrf_token_are_not_the_token() {
        let access = Access::generate("ana").unwrap();
        let user = &access.users()[0];
        assert_eq!(user.token().len(), 64);
        assert_ne!(user.cookie(), user.token());
        assert_ne!(user.csrf(), user.cookie());
        assert_eq!(access.by_cookie(user.cookie()).unwrap().name(), "ana");
        assert!(access.by_cookie(user.token()).is_none());
        let other = Access::generate("ana").unwrap();
        assert_ne!(other.users()[0].token(), user.token(), "random");
    }
}
