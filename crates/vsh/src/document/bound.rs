//! Bounding a document for a reader with a budget (an LLM's context, a tool
//! result): [`TextBounds`] and the `bound` methods of the documents that carry
//! a program's text. What is cut is said in the document's `warnings`, so a
//! reader never mistakes a cut text for the whole.

use std::fmt::Write as _;

use super::{ErrorDocument, ReceiptDocument, ShowDocument};

/// How much text a bounded document carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextBounds {
    /// Characters of each stream (stdout, its base64), of the value's JSON
    /// text, of the program, and of all hunks together.
    pub max_chars: usize,
    /// Entries of each path list (changes, review).
    pub max_paths: usize,
}

impl Default for TextBounds {
    /// 65,536 characters (as the peer's MCP server shows per stream) and
    /// 1,000 paths.
    fn default() -> Self {
        Self { max_chars: 65_536, max_paths: 1_000 }
    }
}

/// `text` cut to at most `max` characters plus a marker: its head (two
/// thirds) and its tail, the marker saying how many characters are missing.
/// `None` when it fits.
pub(crate) fn cut(text: &str, max: usize) -> Option<String> {
    let total = text.chars().count();
    if total <= max {
        return None;
    }
    let head = max - max / 3;
    let tail = max / 3;
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(at, _)| at);
    let tail_start = text.char_indices().nth(total - tail).map_or(text.len(), |(at, _)| at);
    let mut out = String::with_capacity(head_end + (text.len() - tail_start) + 48);
    out.push_str(&text[..head_end]);
    let _ = write!(out, "\n[... {} characters cut ...]\n", total - head - tail);
    out.push_str(&text[tail_start..]);
    Some(out)
}

/// How many of `entries`, from the first, fit `bounds`: at most
/// `max_paths`, and `size` of those kept adds up to at most `max_chars`
/// (the first is always kept).
fn listed_within<T>(entries: &[T], bounds: TextBounds, size: impl Fn(&T) -> usize) -> usize {
    let mut used = 0_usize;
    let mut kept = 0;
    for entry in entries.iter().take(bounds.max_paths) {
        used = used.saturating_add(size(entry));
        if used > bounds.max_chars && kept > 0 {
            break;
        }
        kept += 1;
    }
    kept
}

impl ReceiptDocument {
    /// Cut what the program produced to `bounds`: stdout and its base64 keep
    /// their head and tail, a value whose JSON is too long becomes
    /// `{"$repr": <its cut JSON text>}`, the path lists keep their first
    /// entries, and hunks beyond the shared budget become `budget-spent`.
    /// Each cut adds a warning. Returns whether anything was cut.
    pub fn bound(&mut self, bounds: TextBounds) -> bool {
        let before = self.warnings.len();
        let max = bounds.max_chars;
        if let Some(stdout) = cut(&self.stdout, max) {
            self.warnings.push(format!(
                "stdout ({} characters) cut to {max} characters for this reader",
                self.stdout.chars().count()
            ));
            self.stdout = stdout;
        }
        if let Some(stderr) = cut(&self.stderr, max) {
            self.warnings.push(format!(
                "stderr ({} characters) cut to {max} characters for this reader",
                self.stderr.chars().count()
            ));
            self.stderr = stderr;
        }
        for (name, encoded) in [("stdout_base64", &mut self.stdout_base64), ("stderr_base64", &mut self.stderr_base64)]
        {
            if let Some(text) = encoded
                && text.len() > max
            {
                // Base64 is ASCII: cut at a multiple of 4 so what is left decodes.
                let keep = max - max % 4;
                self.warnings.push(format!("{name} cut to its first {keep} characters for this reader"));
                text.truncate(keep);
            }
        }
        if let Some(exception) = &self.exception
            && let Some(short) = cut(exception, max)
        {
            self.warnings.push(format!(
                "exception ({} characters) cut to {max} characters for this reader",
                exception.chars().count()
            ));
            self.exception = Some(short);
        }
        if !self.value.is_null() {
            let text = self.value.to_string();
            if let Some(short) = cut(&text, max) {
                self.warnings.push(format!(
                    "value ({} characters of JSON) cut to {max} characters for this reader, as $repr",
                    text.chars().count()
                ));
                self.value = serde_json::json!({ "$repr": short });
            }
        }
        // Each path list: at most `max_paths` entries, and at most `max`
        // characters of JSON (a review's entries counted without their
        // hunks, which share their own budget below).
        let total = self.changes.len();
        let kept = listed_within(&self.changes, bounds, |entry| serde_json::to_string(entry).map_or(0, |t| t.len()));
        if kept < total {
            self.warnings.push(format!(
                "changes lists the first {kept} of {total} paths for this reader (at most {} paths and {max} \
                 characters)",
                bounds.max_paths
            ));
            self.changes.truncate(kept);
        }
        let total = self.review.len();
        let kept = listed_within(&self.review, bounds, |review| {
            serde_json::to_string(review).map_or(0, |t| t.len()) - review.hunks.as_ref().map_or(0, String::len)
        });
        if kept < total {
            self.warnings.push(format!(
                "review lists the first {kept} of {total} paths for this reader (at most {} paths and {max} \
                 characters besides their hunks, which have as many)",
                bounds.max_paths
            ));
            self.review.truncate(kept);
        }
        let mut left = max;
        let mut spent = 0_usize;
        for review in &mut self.review {
            let Some(hunks) = &review.hunks else { continue };
            let length = hunks.chars().count();
            if length <= left {
                left -= length;
            } else {
                review.hunks = None;
                review.no_hunks = Some(super::receipt::no_hunks_name(vsh_vfs::NoHunks::BudgetSpent).to_owned());
                spent += 1;
                left = 0;
            }
        }
        if spent > 0 {
            self.warnings.push(format!(
                "the hunks of {spent} path{} were left out: all hunks together are cut to {max} characters \
                 for this reader",
                if spent == 1 { "" } else { "s" }
            ));
        }
        self.warnings.len() > before
    }
}

impl ShowDocument {
    /// [`ReceiptDocument::bound`] on the receipt, and the program cut to the
    /// same number of characters (said in the receipt's warnings).
    pub fn bound(&mut self, bounds: TextBounds) -> bool {
        let mut cut_any = self.receipt.bound(bounds);
        if let Some(program) = &self.program
            && let Some(short) = cut(program, bounds.max_chars)
        {
            self.receipt.warnings.push(format!(
                "program ({} characters) cut to {} characters for this reader",
                program.chars().count(),
                bounds.max_chars
            ));
            self.program = Some(short);
            cut_any = true;
        }
        cut_any
    }
}

impl ErrorDocument {
    /// Cut the error to `bounds`: its message and stdout keep their head and
    /// tail, and the lists keep their first entries; a cut adds a cause that
    /// says so. Returns whether anything was cut.
    pub fn bound(&mut self, bounds: TextBounds) -> bool {
        let mut notes = Vec::new();
        if let Some(message) = cut(&self.message, bounds.max_chars) {
            notes.push(format!("the message was cut to {} characters for this reader", bounds.max_chars));
            self.message = message;
        }
        if let Some(stdout) = self.stdout.as_deref().and_then(|stdout| cut(stdout, bounds.max_chars)) {
            notes.push(format!("stdout was cut to {} characters for this reader", bounds.max_chars));
            self.stdout = Some(stdout);
        }
        if let Some(stderr) = self.stderr.as_deref().and_then(|stderr| cut(stderr, bounds.max_chars)) {
            notes.push(format!("stderr was cut to {} characters for this reader", bounds.max_chars));
            self.stderr = Some(stderr);
        }
        if self.changes.len() > bounds.max_paths {
            notes.push(format!(
                "changes lists the first {} of {} for this reader",
                bounds.max_paths,
                self.changes.len()
            ));
            self.changes.truncate(bounds.max_paths);
        }
        let max = bounds.max_paths;
        for (name, length) in [
            ("causes", self.causes.len()),
            ("paths", self.paths.len()),
            ("candidates", self.candidates.len()),
            ("denied", self.denied.len()),
        ] {
            if length > max {
                notes.push(format!("{name} lists the first {max} of {length} for this reader"));
            }
        }
        self.causes.truncate(max);
        self.paths.truncate(max);
        self.candidates.truncate(max);
        self.denied.truncate(max);
        let cut_any = !notes.is_empty();
        self.causes.extend(notes);
        cut_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_keeps_head_and_tail_on_character_boundaries() {
        assert_eq!(cut("short", 5), None);
        let text: String = "é".repeat(30) + &"x".repeat(30);
        let short = cut(&text, 30).unwrap();
        assert!(short.starts_with(&"é".repeat(20)), "{short}");
        assert!(short.ends_with(&"x".repeat(10)), "{short}");
        assert!(short.contains("[... 30 characters cut ...]"), "{short}");
    }
}
