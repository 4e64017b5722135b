//! The line gate in front of the MCP service: every line a client sends is
//! answered, even one the service would never see.
//!
//! rmcp's stdio transport drops a line longer than its limit without an
//! answer (the client waits forever for that request), and answers a line
//! that is not JSON with -32600 and no id. The gate reads stdin itself, a
//! line at a time and never more than [`MAX_LINE_BYTES`] of one: a line
//! over the limit is discarded as it streams in and answered with -32600
//! ("request too large") and the request's id when its first bytes name
//! one; a line that is not JSON is answered with -32700 ("parse error"), id
//! null, as JSON-RPC 2.0 says; a JSON line that is no MCP message (rmcp
//! would answer -32600 without the id) is answered with the request's id:
//! -32602 ("invalid params") for a method this server serves, else -32600;
//! every other line goes on to the service.
//! The service's output and the gate's answers share one writer task, which
//! writes whole lines, so they never interleave.

use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

/// The longest line passed to the service (rmcp's own limit is 16 MiB; a
/// program is at most 1 MiB).
pub(crate) const MAX_LINE_BYTES: usize = 8 << 20;

/// How much of an oversized line is kept to find its id.
const ID_WINDOW: usize = 64 << 10;

/// The JSON-RPC error answering the request whose id is `id` (its JSON
/// text exactly as the client wrote it, so a large number comes back
/// unchanged; `None`: null) with `code` and `message`, as one line.
fn error_line(id: Option<&[u8]>, code: i64, message: &str) -> Vec<u8> {
    let message = serde_json::to_string(message).unwrap_or_else(|_| "\"\"".to_owned());
    let mut line = br#"{"jsonrpc":"2.0","id":"#.to_vec();
    line.extend_from_slice(id.unwrap_or(b"null"));
    line.extend_from_slice(format!(r#","error":{{"code":{code},"message":{message}}}}}"#).as_bytes());
    line.push(b'\n');
    line
}

/// The id of the request in the first bytes of a line: the JSON text of
/// the value of the top-level object's `"id"` member when it is a string
/// or a number (an `"id"` nested in the params is not the request's),
/// found without parsing the rest of the line, which may be cut short,
/// too deep or otherwise unreadable.
fn id_in(prefix: &[u8]) -> Option<&[u8]> {
    let mut depth = 0_usize;
    let mut at = 0;
    // A JSON parser keeps the last of duplicate members: so does this.
    let mut found = None;
    while at < prefix.len() {
        match prefix[at] {
            b'"' => {
                let Some(end) = string_end(prefix, at) else { break };
                if depth == 1 {
                    let after = skip_space(prefix, end);
                    if prefix.get(after) == Some(&b':') && &prefix[at..end] == b"\"id\"" {
                        found = scalar_at(prefix, skip_space(prefix, after + 1));
                    }
                }
                at = end;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    found
}

/// Where the JSON string starting at `start` (its opening quote) ends:
/// just past its closing quote.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// The JSON string or number at `at`, as written, if it is a whole one.
fn scalar_at(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let end = match bytes.get(at)? {
        b'"' => string_end(bytes, at)?,
        b'-' | b'0'..=b'9' => {
            // A number that runs into the end of what was kept may have
            // been cut short: not echoed.
            let length =
                bytes[at..].iter().position(|byte| !matches!(byte, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))?;
            at + length
        }
        _ => return None,
    };
    let text = &bytes[at..end];
    // Only what a JSON parser reads as one string or number is echoed.
    let whole = serde_json::from_slice::<Value>(text).is_ok_and(|value| value.is_string() || value.is_number());
    whole.then_some(text)
}

/// What one read of the client's stream found.
enum Line {
    /// A whole line (without its newline), within the limit.
    Whole(Vec<u8>),
    /// A line over the limit: its length, and its first bytes.
    Oversized(usize, Vec<u8>),
    /// The stream ended.
    End,
}

/// Read one line of at most [`MAX_LINE_BYTES`] from `reader`, discarding the
/// rest of a longer one as it comes (memory stays bounded).
async fn read_line<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> std::io::Result<Line> {
    let mut line = Vec::new();
    let mut total = 0_usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            // A last line without a newline is still a line.
            return Ok(match (total, line.is_empty()) {
                (0, _) => Line::End,
                (total, _) if total > MAX_LINE_BYTES => Line::Oversized(total, line),
                _ => Line::Whole(line),
            });
        }
        let (chunk, done) = match available.iter().position(|byte| *byte == b'\n') {
            Some(end) => (&available[..end], Some(end + 1)),
            None => (available, None),
        };
        total += chunk.len();
        let keep = if total > MAX_LINE_BYTES { ID_WINDOW.saturating_sub(line.len()) } else { chunk.len() };
        line.extend_from_slice(&chunk[..keep.min(chunk.len())]);
        if total > MAX_LINE_BYTES {
            line.truncate(ID_WINDOW);
        }
        let consumed = done.unwrap_or(available.len());
        reader.consume(consumed);
        if done.is_some() {
            return Ok(if total > MAX_LINE_BYTES { Line::Oversized(total, line) } else { Line::Whole(line) });
        }
    }
}

/// Read the client's lines from `input`: pass each one that is JSON and
/// within the limit to `service` (with its newline), answer the others on
/// `answers`. Ends when `input` ends or the service is gone.
pub(crate) async fn gate<R, W>(input: R, mut service: W, answers: mpsc::Sender<Vec<u8>>) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::new(input);
    loop {
        match read_line(&mut reader).await? {
            Line::End => return service.shutdown().await,
            Line::Oversized(total, prefix) => {
                let message = format!(
                    "request too large: a line of {total} bytes, over the {} MiB a request may be",
                    MAX_LINE_BYTES >> 20
                );
                if answers.send(error_line(id_in(&prefix), -32600, &message)).await.is_err() {
                    return Ok(());
                }
            }
            Line::Whole(line) if line.iter().all(u8::is_ascii_whitespace) => {}
            Line::Whole(line) => {
                if let Err(error) = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(&line) {
                    if answers.send(refusal(&line, &error)).await.is_err() {
                        return Ok(());
                    }
                    continue;
                }
                let mut line = line;
                line.push(b'\n');
                if service.write_all(&line).await.is_err() {
                    // The service is gone.
                    return Ok(());
                }
            }
        }
    }
}

/// The answer to a line that is no MCP message (`error` says why), with
/// the request's id when its top-level object names one: -32602 ("invalid
/// params") for a well-formed request (`"jsonrpc": "2.0"`, an integer or
/// string id) to a method this server serves ([`crate::serve::SERVED_METHODS`]),
/// whose params do not fit it; -32600 ("invalid request") for anything else
/// that names an id or is JSON; -32700 ("parse error"), id null, for a line
/// that is neither.
fn refusal(line: &[u8], error: &serde_json::Error) -> Vec<u8> {
    let id = id_in(line);
    let Ok(value) = serde_json::from_slice::<Value>(line) else {
        return match id {
            Some(id) => error_line(Some(id), -32600, &format!("invalid request: {error}")),
            None => error_line(None, -32700, &format!("parse error: the line is not JSON ({error})")),
        };
    };
    let well_formed = value.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && value.get("id").is_some_and(|id| id.is_string() || id.is_i64() || id.is_u64() && id.as_i64().is_some());
    match value.get("method").and_then(Value::as_str) {
        Some(method) if well_formed && crate::serve::SERVED_METHODS.contains(&method) => {
            error_line(id, -32602, &crate::serve::invalid_params(method, &error.to_string()))
        }
        _ => error_line(id, -32600, &format!("invalid request: {error}")),
    }
}

/// Write every line the service writes to `service` and every answer of
/// the gate to `output`, whole lines at a time, until both are done.
/// `line`, a JSON message and its newline, with the line and paragraph
/// separators (U+2028, U+2029) a JSON encoder may leave raw inside a string
/// written as the escapes they equal (`\u2028`, `\u2029`): a client that
/// splits its input into lines as Python's `splitlines` or JavaScript does
/// would cut the message there. In JSON they occur only inside strings.
fn one_line(line: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    const SEPARATORS: [(&[u8], &[u8]); 2] = [("\u{2028}".as_bytes(), b"\\u2028"), ("\u{2029}".as_bytes(), b"\\u2029")];
    if !line.windows(3).any(|window| SEPARATORS.iter().any(|(raw, _)| window == *raw)) {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = Vec::with_capacity(line.len() + 16);
    let mut rest = line;
    while !rest.is_empty() {
        if let Some((raw, escaped)) = SEPARATORS.iter().find(|(raw, _)| rest.starts_with(raw)) {
            out.extend_from_slice(escaped);
            rest = &rest[raw.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    std::borrow::Cow::Owned(out)
}

pub(crate) async fn writer<R, W>(service: R, mut answers: mpsc::Receiver<Vec<u8>>, mut output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut service = BufReader::new(service);
    let mut line = Vec::new();
    let mut service_open = true;
    let mut answers_open = true;
    while service_open || answers_open {
        tokio::select! {
            read = service.read_until(b'\n', &mut line), if service_open => {
                if read? == 0 {
                    service_open = false;
                } else {
                    output.write_all(&one_line(&line)).await?;
                    output.flush().await?;
                }
                line.clear();
            }
            answer = answers.recv(), if answers_open => match answer {
                Some(answer) => {
                    output.write_all(&answer).await?;
                    output.flush().await?;
                }
                None => answers_open = false,
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_separator_inside_a_string_is_written_as_its_escape_and_the_json_is_the_same() {
        let message = serde_json::json!({"text": "a\u{2028}b\u{2029}c"});
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        let written = one_line(&line).into_owned();
        let text = String::from_utf8(written).unwrap();
        assert_eq!(text.lines().count(), 1, "{text:?}");
        assert!(!text.contains(['\u{2028}', '\u{2029}']), "{text:?}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), message);
        assert_eq!(&*one_line(b"{}\n"), b"{}\n");
    }

    #[test]
    fn the_id_of_a_request_is_found_in_its_first_bytes_or_is_null() {
        let id = |line: &[u8]| id_in(line).map(|id| String::from_utf8(id.to_vec()).unwrap());
        assert_eq!(id(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#).as_deref(), Some("7"));
        assert_eq!(id(br#"{"method":"x", "id" : "a-1", "params""#).as_deref(), Some(r#""a-1""#));
        // An "id" inside the params is never the request's, before or after it.
        assert_eq!(id(br#"{"id":3,"params":{"id":9}"#).as_deref(), Some("3"));
        assert_eq!(id(br#"{"params":{"arguments":{"id":"evil"}},"id":7}"#).as_deref(), Some("7"));
        assert_eq!(id(br#"{"params":["id", {"id": 1}], "x": "\"id\": 2"}"#), None);
        // A number is echoed as written, however large.
        assert_eq!(id(br#"{"id":123456789012345678901234567890}"#).as_deref(), Some("123456789012345678901234567890"));
        assert_eq!(id(br#"{"method":"x","params":{"code":"aaaa"#), None);
        assert_eq!(id(br#"{"id":null}"#), None);
        assert_eq!(id(br#"{"id":"unterminated"#), None);
        // A number cut short by the end of what was kept is no id.
        assert_eq!(id(br#"{"params":{},"id":12345"#), None);
        assert_eq!(id(br#"{"params":{},"id":12345}"#).as_deref(), Some("12345"));
        // Duplicate members: the last, as a parser keeps it.
        assert_eq!(id(br#"{"id":1,"id":2}"#).as_deref(), Some("2"));
        assert_eq!(id(b"not json at all"), None);
    }

    #[test]
    fn a_line_that_is_no_mcp_message_gets_the_code_its_fault_deserves() {
        let answer = |line: &str| {
            let error = serde_json::from_str::<rmcp::model::ClientJsonRpcMessage>(line).unwrap_err();
            let reply: Value = serde_json::from_slice(&refusal(line.as_bytes(), &error)).unwrap();
            (reply["id"].clone(), reply["error"]["code"].as_i64().unwrap())
        };
        let json = |text: &str| serde_json::from_str::<Value>(text).unwrap();
        let call = r#""method":"tools/call","params":["vsh_run"]"#;
        // A well-formed request whose params do not fit: invalid params.
        assert_eq!(answer(&format!(r#"{{"jsonrpc":"2.0","id":4,{call}}}"#)), (json("4"), -32602));
        assert_eq!(answer(&format!(r#"{{"jsonrpc":"2.0","id":"s",{call}}}"#)), (json(r#""s""#), -32602));
        // The envelope at fault: invalid request, with the id as written.
        assert_eq!(answer(&format!(r#"{{"jsonrpc":"1.0","id":4,{call}}}"#)), (json("4"), -32600));
        assert_eq!(answer(&format!(r#"{{"id":4,{call}}}"#)), (json("4"), -32600));
        assert_eq!(answer(&format!(r#"{{"jsonrpc":"2.0","id":1.5,{call}}}"#)), (json("1.5"), -32600));
        let huge = answer(&format!(r#"{{"jsonrpc":"2.0","id":123456789012345678901234567890,{call}}}"#));
        assert_eq!(huge.1, -32600);
        let line = format!(r#"{{"jsonrpc":"2.0","id":123456789012345678901234567890,{call}}}"#);
        let error = serde_json::from_str::<rmcp::model::ClientJsonRpcMessage>(&line).unwrap_err();
        let reply = String::from_utf8(refusal(line.as_bytes(), &error)).unwrap();
        assert!(reply.contains(r#""id":123456789012345678901234567890,"#), "{reply}");
        // Valid JSON this parser will not read (too deep) still names its id.
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(answer(&deep), (json("9"), -32600));
        // No id anywhere, not JSON: a parse error.
        assert_eq!(answer("{not json"), (Value::Null, -32700));
    }

    #[tokio::test]
    async fn every_line_is_passed_on_or_answered_and_memory_stays_bounded() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\",\"params\":\"{}\"}}\n",
            "x".repeat(MAX_LINE_BYTES + 10)
        );
        let input = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}}\nnot json\n\n{big}{{\"id\":2}}\n\
             {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n"
        );
        let (service_in, mut service_out) = tokio::io::duplex(1 << 20);
        let (answers_in, mut answers_out) = mpsc::channel(8);
        let gated = tokio::spawn(gate(std::io::Cursor::new(input.into_bytes()), service_in, answers_in));
        let mut passed = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut service_out, &mut passed).await.unwrap();
        gated.await.unwrap().unwrap();
        assert_eq!(
            passed,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\
             {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
        );
        let parse: Value = serde_json::from_slice(&answers_out.recv().await.unwrap()).unwrap();
        assert_eq!((parse["id"].clone(), parse["error"]["code"].clone()), (Value::Null, serde_json::json!(-32700)));
        let large: Value = serde_json::from_slice(&answers_out.recv().await.unwrap()).unwrap();
        assert_eq!(
            (large["id"].clone(), large["error"]["code"].clone()),
            (serde_json::json!(42), serde_json::json!(-32600))
        );
        // JSON, but no MCP message: answered with its id.
        let invalid: Value = serde_json::from_slice(&answers_out.recv().await.unwrap()).unwrap();
        assert_eq!(
            (invalid["id"].clone(), invalid["error"]["code"].clone()),
            (serde_json::json!(2), serde_json::json!(-32600))
        );
        assert!(answers_out.recv().await.is_none());
    }
}
