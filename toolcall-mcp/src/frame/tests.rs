//! The unit tests of the frame scanner and of the answers to unreadable frames.

use std::collections::HashSet;

use super::scan::Member;
use super::*;

fn scan(text: &[u8]) -> Scan {
    let mut scanner = Scanner::default();
    // Fed in small pieces, as a stream would.
    for chunk in text.chunks(3) {
        scanner.feed(chunk);
    }
    scanner.finish()
}

fn answer(line: &[u8]) -> Value {
    match read(line) {
        Outcome::Answer(answer) => serde_json::from_slice(&answer).unwrap(),
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[test]
fn finds_the_id_wherever_it_is() {
    for (text, id) in [
        (&br#"{"jsonrpc":"2.0","id":7,"method":"x"}"#[..], json!(7)),
        (
            br#"{"method":"x","params":{"id":1,"a":[{"id":2}]},"id":"a\"b"}"#,
            json!("a\"b"),
        ),
        (br#"{ "id" : -12 }"#, json!(-12)),
        (br#"{"i\u0064":3}"#, json!(3)),
        (br#"{"params":"{\"id\":9}","id":4}"#, json!(4)),
    ] {
        assert_eq!(scan(text).id, Some(id), "{}", String::from_utf8_lossy(text));
    }
}

#[test]
fn an_id_that_is_no_id_is_none() {
    for text in [
        &br#"{"id":null}"#[..],
        br#"{"id":{"a":1}}"#,
        br#"{"id":1,"id":2}"#,
        br#"[{"id":1}]"#,
        br#"{"x":{"id":1}}"#,
    ] {
        assert_eq!(scan(text).id, None, "{}", String::from_utf8_lossy(text));
    }
    let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_REQUEST_ID_BYTES));
    assert_eq!(scan(long.as_bytes()).id, None);
    assert_eq!(scan(long.as_bytes()).id_problem, Some(IdProblem::TooLong));
}

#[test]
fn an_id_is_kept_only_if_it_comes_back_as_sent() {
    for (text, id) in [
        ("9007199254740993", json!(9007199254740993_u64)),
        ("9223372036854775807", json!(i64::MAX)),
        ("-9223372036854775808", json!(i64::MIN)),
        ("0", json!(0)),
        (r#""a\u0062""#, json!("ab")),
    ] {
        let frame = format!(r#"{{"id":{text},"method":"x"}}"#);
        let found = scan(frame.as_bytes());
        assert_eq!((found.id, found.id_problem), (Some(id), None), "{text}");
    }
    for (text, problem) in [
        ("123456789012345678901234567890", IdProblem::NotAnInteger),
        ("9223372036854775808", IdProblem::NotAnInteger),
        ("-9223372036854775809", IdProblem::NotAnInteger),
        ("1.5", IdProblem::NotAnInteger),
        ("1.0", IdProblem::NotAnInteger),
        ("1e2", IdProblem::NotAnInteger),
        ("-0", IdProblem::NotAnInteger),
        ("null", IdProblem::NotAnId),
        ("true", IdProblem::NotAnId),
        ("[1]", IdProblem::NotAnId),
        (r#"{"a":1}"#, IdProblem::NotAnId),
    ] {
        let frame = format!(r#"{{"id":{text},"method":"x"}}"#);
        let found = scan(frame.as_bytes());
        assert_eq!(
            (found.id, found.id_problem),
            (None, Some(problem)),
            "{text}"
        );
    }
    // The bound is on the text as written: quotes and escapes count.
    let at = format!(r#""{}""#, "x".repeat(MAX_REQUEST_ID_BYTES - 2));
    let over = format!(r#""{}\u0078""#, "x".repeat(MAX_REQUEST_ID_BYTES - 7));
    assert!(scan(format!(r#"{{"id":{at}}}"#).as_bytes()).id.is_some());
    assert_eq!(
        scan(format!(r#"{{"id":{over}}}"#).as_bytes()).id_problem,
        Some(IdProblem::TooLong)
    );
}

#[test]
fn a_request_with_an_id_it_cannot_echo_is_refused_with_a_null_id() {
    let huge = format!(r#""{}""#, "i".repeat(100_000));
    for text in [huge.as_str(), "12345678901234567890123", "1.5", "null"] {
        let line = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"tools/list"}}"#);
        let Outcome::Answer(bytes) = read(line.as_bytes()) else {
            panic!("{text}: not answered");
        };
        assert!(bytes.len() < 1024, "{} bytes", bytes.len());
        let answer: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(answer["id"], Value::Null, "{answer}");
        assert_eq!(answer["error"]["code"], INVALID_REQUEST, "{answer}");
    }
    // A response is not answered, whatever its id.
    let response = r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#;
    assert!(!matches!(read(response.as_bytes()), Outcome::Answer(_)));
}

#[test]
fn finds_the_arguments_span() {
    let text = br#"{"method":"tools/call","params":{"name":"a","arguments":{"x":[1,{"y":"}"}]},"_meta":{}},"id":1}"#;
    let found = scan(text);
    assert_eq!(found.method.as_deref(), Some("tools/call"));
    let (start, end) = found.arguments.unwrap();
    assert_eq!(&text[start..end], br#"{"x":[1,{"y":"}"}]}"#);

    let text = br#"{"params":{"arguments":1e400 ,"name":"a"},"method":"tools/call","id":1}"#;
    let (start, end) = scan(text).arguments.unwrap();
    assert_eq!(&text[start..end], b"1e400");

    let text = br#"{"params":{"arguments":"s"},"id":1}"#;
    let (start, end) = scan(text).arguments.unwrap();
    assert_eq!(&text[start..end], br#""s""#);

    // Only the `arguments` of the top-level `params`.
    let text = br#"{"x":{"params":{"arguments":{}}},"params":[{"arguments":1}],"id":1}"#;
    assert_eq!(scan(text).arguments, None);
}

#[test]
fn reports_members_given_twice() {
    assert_eq!(scan(br#"{"id":1,"id":2}"#).duplicate, Some(Member::Id));
    assert_eq!(
        scan(br#"{"params":{"arguments":{},"arguments":{}},"id":1}"#).duplicate,
        Some(Member::Arguments)
    );
    assert_eq!(
        scan(br#"{"a":1,"a":2,"params":{"b":1,"b":2}}"#).duplicate,
        None
    );
}

#[test]
fn a_deep_or_unreadable_frame_is_answered_with_its_id() {
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{{"_meta":{{"x":{}{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let answered = answer(deep.as_bytes());
    assert_eq!(answered["id"], 5);
    assert_eq!(answered["error"]["code"], PARSE_ERROR);

    let answered = answer(b"{\"id\":6,\"method\":\"x\xff\"}");
    assert_eq!(answered["id"], 6);
    assert_eq!(answered["error"]["code"], PARSE_ERROR);

    let answered = answer(b"{\"id\":");
    assert_eq!(answered["id"], Value::Null);
    assert_eq!(answered["error"]["code"], PARSE_ERROR);
}

#[test]
fn notifications_and_responses_are_not_answered() {
    for line in [
        &b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":{\"a\":1e400}}"[..],
        b"{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"a\":1e400}}",
        b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}",
        b"   ",
        b"\r",
    ] {
        assert!(
            !matches!(read(line), Outcome::Answer(_)),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn a_call_hands_its_raw_arguments_over() {
    let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1,"a":2,"n":1e400}}}"#;
    let Outcome::Message(message) = read(line) else {
        panic!("a call with bad arguments still reaches rmcp");
    };
    let JsonRpcMessage::Request(JsonRpcRequest {
        request: ClientRequest::CallToolRequest(call),
        ..
    }) = *message
    else {
        panic!("a tools/call");
    };
    assert_eq!(call.params.arguments, Some(serde_json::Map::new()));
    let raw = call.extensions.get::<RawArguments>().unwrap();
    assert_eq!(raw.0.as_deref(), Some(r#"{"a":1,"a":2,"n":1e400}"#));
}

#[test]
fn duplicates_outside_the_arguments_are_invalid_requests() {
    let answered = answer(
        br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","name":"b"}}"#,
    );
    assert_eq!(answered["id"], 2);
    assert_eq!(answered["error"]["code"], INVALID_REQUEST);
    let answered = answer(br#"{"jsonrpc":"2.0","id":2,"id":3,"method":"tools/list"}"#);
    assert_eq!(answered["id"], Value::Null);
    assert_eq!(answered["error"]["code"], INVALID_REQUEST);
}

#[test]
fn answers_quote_no_more_than_a_bound_of_the_input() {
    let method = "m".repeat(100_000);
    let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":5}}"#);
    let Outcome::Answer(answered) = read(line.as_bytes()) else {
        panic!("an invalid request is answered");
    };
    assert!(answered.len() < 1024, "{}", answered.len());
}

/// A small deterministic generator of JSON texts, with the member names
/// the scan looks for at every depth and strings full of escapes.
struct Gen(u64);

impl Gen {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }

    fn space(&mut self) -> &'static str {
        ["", " ", "\n\t ", "\r\n"][self.next(4) as usize]
    }

    fn string(&mut self) -> String {
        let pieces = [
            "id",
            "arguments",
            "params",
            "method",
            "\\\"",
            "\\\\",
            "{",
            "}",
            "[",
            "]",
            ",",
            ":",
            "\\u0022",
            "\\/",
            "é",
            "x",
        ];
        let mut text = String::from('"');
        for _ in 0..self.next(5) {
            text.push_str(pieces[self.next(pieces.len() as u64) as usize]);
        }
        text.push('"');
        text
    }

    fn key(&mut self) -> String {
        match self.next(5) {
            0 => "\"id\"".to_owned(),
            1 => "\"arguments\"".to_owned(),
            2 => "\"argu\\u006dents\"".to_owned(),
            _ => self.string(),
        }
    }

    fn value(&mut self, depth: u32) -> String {
        let choice = if depth > 4 {
            self.next(4)
        } else {
            self.next(7)
        };
        match choice {
            0 => self.string(),
            1 => ["0", "-12", "1.5e3", "true", "false", "null"][self.next(6) as usize].to_owned(),
            2 => self.next(1000).to_string(),
            3 => "{}".to_owned(),
            4 | 5 => {
                let mut members: Vec<String> = Vec::new();
                let mut keys = HashSet::new();
                for _ in 0..self.next(4) {
                    let key = self.key();
                    let name: String = serde_json::from_str(&key).unwrap();
                    if keys.insert(name) {
                        let (a, b) = (self.space(), self.space());
                        members.push(format!("{key}{a}:{b}{}", self.value(depth + 1)));
                    }
                }
                let comma = format!("{},{}", self.space(), self.space());
                format!("{{{}}}", members.join(&comma))
            }
            _ => {
                let items: Vec<String> = (0..self.next(4)).map(|_| self.value(depth + 1)).collect();
                format!("[{}]", items.join(","))
            }
        }
    }
}

#[test]
fn the_scan_agrees_with_serde_json_on_valid_frames() {
    let mut generator = Gen(0x9E37_79B9_7F4A_7C15);
    for _ in 0..3000 {
        let arguments = generator.value(1);
        let params = format!(
            r#"{{"name":"t",{}"arguments"{}:{}{}{},"_meta":{}}}"#,
            generator.space(),
            generator.space(),
            generator.space(),
            arguments,
            generator.space(),
            generator.value(2)
        );
        let id = if generator.next(2) == 0 {
            generator.next(1000).to_string()
        } else {
            generator.string()
        };
        let frame = match generator.next(2) {
            0 => {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#)
            }
            _ => {
                format!(r#"{{"method":"tools/call","params":{params},"jsonrpc":"2.0","id":{id}}}"#)
            }
        };
        let parsed = serde_json::from_str::<Value>(&frame).expect(&frame);
        let found = scan(frame.as_bytes());
        assert_eq!(found.id.as_ref(), Some(&parsed["id"]), "{frame}");
        assert_eq!(found.method.as_deref(), Some("tools/call"), "{frame}");
        let (start, end) = found.arguments.expect(&frame);
        let span: Value = serde_json::from_str(&frame[start..end]).expect(&frame);
        assert_eq!(span, parsed["params"]["arguments"], "{frame}");
        assert_eq!(&frame[start..end], arguments, "{frame}");
    }
}

/// The direct reading of a request-shaped `tools/call` gives what rmcp's
/// own reading gives, value for value and error for error, whatever the
/// frame holds (or lacks).
#[test]
fn a_call_read_directly_is_what_rmcp_reads() {
    let frames = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_order","arguments":{}}}"#,
        r#"{"method":"tools/call","id":"a\"b","jsonrpc":"2.0","params":{"arguments":{},"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":-3,"method":"tools/call","params":{"name":"x","arguments":null,"_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{},"task":{"ttl":1000}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","extra":[1,{"a":2}]},"other":true}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":7}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":[]}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":null}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call"}"#,
        r#"{"jsonrpc":"1.0","id":2,"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"id":2,"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","_meta":7}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","task":"soon"}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"},"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"},"error":{}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
    ];
    let mut direct = 0;
    for text in frames {
        let scan = scan(text.as_bytes());
        if scan.is_request_shaped() {
            direct += 1;
        }
        let long_way = serde_json::from_str::<ClientJsonRpcMessage>(text);
        match (parse(text, &scan, true), long_way) {
            (Ok(read), Ok(expected)) => {
                let is_call = |message: &ClientJsonRpcMessage| {
                    matches!(
                        message,
                        JsonRpcMessage::Request(JsonRpcRequest {
                            request: ClientRequest::CallToolRequest(_),
                            ..
                        })
                    )
                };
                assert_eq!(is_call(&read), is_call(&expected), "{text}");
                assert_eq!(
                    serde_json::to_value(&read).unwrap(),
                    serde_json::to_value(&expected).unwrap(),
                    "{text}"
                );
            }
            (Err(error), Err(expected)) => {
                assert_eq!(error.to_string(), expected.to_string(), "{text}")
            }
            (read, expected) => panic!("{text}: {read:?} against {expected:?}"),
        }
    }
    // Most of the frames above take the direct reading.
    assert!(direct >= 15, "{direct}");
}

/// `feed` passes over the bytes that change nothing at once; scanning every
/// byte one at a time must leave the scanner exactly as it does, on any
/// text cut anywhere: valid frames, frames with bytes changed (quotes,
/// escapes, brackets, long member names) or cut short, and random bytes.
#[test]
fn passing_over_bytes_scans_as_reading_each() {
    let mut generator = Gen(0x2545_F491_4F6C_DD1D);
    let specials: &[u8] = b"\"\\{}[],: x\x80";
    let long_name = format!("\"{}\"", "n".repeat(70));
    for round in 0..4000 {
        let arguments = generator.value(1);
        let mut text = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"t","arguments":{arguments},{long_name}:1,"_meta":{}}}}}"#,
            generator.next(1000),
            generator.value(2)
        )
        .into_bytes();
        match round % 4 {
            0 => {}
            1 => {
                for _ in 0..=generator.next(3) {
                    let at = generator.next(text.len() as u64) as usize;
                    text[at] = specials[generator.next(specials.len() as u64) as usize];
                }
            }
            2 => text.truncate(generator.next(text.len() as u64) as usize),
            _ => {
                text = (0..generator.next(200))
                    .map(|_| specials[generator.next(specials.len() as u64) as usize])
                    .collect();
            }
        }
        let mut bytewise = Scanner::default();
        bytewise.feed_bytewise(&text);
        let mut fed = Scanner::default();
        let mut rest = &text[..];
        while !rest.is_empty() {
            let (chunk, after) = rest.split_at(1 + generator.next(rest.len() as u64) as usize);
            fed.feed(chunk);
            rest = after;
        }
        let shown = String::from_utf8_lossy(&text);
        assert_eq!(format!("{fed:?}"), format!("{bytewise:?}"), "{shown}");
        assert_eq!(
            format!("{:?}", fed.finish()),
            format!("{:?}", bytewise.finish()),
            "{shown}"
        );
    }
}
