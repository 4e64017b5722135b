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

/// The JSON-RPC error answering `id` with `code` and `message`, as one line.
fn error_line(id: &Value, code: i64, message: &str) -> Vec<u8> {
    let reply = serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } });
    let mut line = serde_json::to_vec(&reply).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The request id the first bytes of a line name (`"id": 7`, `"id": "a"`),
/// else null.
fn id_in(prefix: &[u8]) -> Value {
    let mut at = 0;
    while let Some(found) = prefix[at..].windows(4).position(|window| window == b"\"id\"") {
        let after = at + found + 4;
        let rest = &prefix[after..];
        let colon = rest.iter().position(|byte| !byte.is_ascii_whitespace());
        if let Some(colon) = colon.filter(|colon| rest[*colon] == b':') {
            let value = serde_json::Deserializer::from_slice(&rest[colon + 1..]).into_iter::<Value>().next();
            if let Some(Ok(id @ (Value::Number(_) | Value::String(_)))) = value {
                return id;
            }
        }
        at = after;
    }
    Value::Null
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
                if answers.send(error_line(&id_in(&prefix), -32600, &message)).await.is_err() {
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

/// The answer to a line that is no MCP message (`error` says why): -32700
/// when it is not JSON at all; else, with the request's id, -32602 for a
/// method this server serves ([`crate::serve::SERVED_METHODS`]: its params
/// do not fit it), -32600 for anything else.
fn refusal(line: &[u8], error: &serde_json::Error) -> Vec<u8> {
    let Ok(value) = serde_json::from_slice::<Value>(line) else {
        return error_line(&Value::Null, -32700, "parse error: the line is not JSON");
    };
    let id = match value.get("id") {
        Some(id @ (Value::Number(_) | Value::String(_))) => id.clone(),
        _ => Value::Null,
    };
    match value.get("method").and_then(Value::as_str) {
        Some(method) if !id.is_null() && crate::serve::SERVED_METHODS.contains(&method) => {
            error_line(&id, -32602, &crate::serve::invalid_params(method, &error.to_string()))
        }
        _ => error_line(&id, -32600, &format!("invalid request: {error}")),
    }
}

/// Write every line the service writes to `service` and every answer of
/// the gate to `output`, whole lines at a time, until both are done.
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
                    output.write_all(&line).await?;
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
    fn the_id_of_a_request_is_found_in_its_first_bytes_or_is_null() {
        assert_eq!(id_in(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#), serde_json::json!(7));
        assert_eq!(id_in(br#"{"method":"x", "id" : "a-1", "params""#), serde_json::json!("a-1"));
        // An "id" inside the params is not the request's when the real one comes first.
        assert_eq!(id_in(br#"{"id":3,"params":{"id":9}"#), serde_json::json!(3));
        assert_eq!(id_in(br#"{"method":"x","params":{"code":"aaaa"#), Value::Null);
        assert_eq!(id_in(b"not json at all"), Value::Null);
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
