//! [`OutputSink`]: captured standard output with a byte cap that remembers
//! being exceeded.
//!
//! Monty's own capped collector raises a `MemoryError` the guest can catch,
//! after which nothing shows that output was lost. This sink raises the same
//! error but also records the overflow, so the executor can end the run with
//! [`LimitKind::OutputBytes`] however the guest reacts.
//!
//! In process the sink keeps the whole text; in the worker it keeps only what
//! has not been sent to the parent yet ([`OutputSink::take_pending`]), while
//! still counting every byte against the cap.

use std::borrow::Cow;

use monty_types::{ExcType, MontyException, PrintWriterCallback};

use crate::limits::{LimitExceeded, LimitKind};

/// Standard output of one run.
#[derive(Debug)]
pub(crate) struct OutputSink {
    /// The captured text (in process), or the text not yet sent (worker).
    text: String,
    /// Bytes accepted so far.
    total: u64,
    max_bytes: u64,
    overflow: Option<LimitExceeded>,
}

impl OutputSink {
    pub(crate) fn new(max_bytes: u64) -> Self {
        Self { text: String::new(), total: 0, max_bytes, overflow: None }
    }

    /// The text accepted since the last call (the worker streams it out).
    pub(crate) fn take_pending(&mut self) -> String {
        std::mem::take(&mut self.text)
    }

    /// The first refused write, if any.
    pub(crate) fn overflow(&self) -> Option<LimitExceeded> {
        self.overflow
    }

    /// The captured text (never longer than the cap).
    pub(crate) fn take_text(&mut self) -> String {
        std::mem::take(&mut self.text)
    }

    /// Bytes accepted so far (sent or not).
    pub(crate) fn len(&self) -> u64 {
        self.total
    }

    fn append(&mut self, piece: &str) -> Result<(), MontyException> {
        let attempted = self.total.saturating_add(piece.len() as u64);
        if attempted > self.max_bytes {
            let exceeded = LimitExceeded { limit: LimitKind::OutputBytes, attempted, max: self.max_bytes };
            self.overflow.get_or_insert(exceeded);
            return Err(MontyException::new(ExcType::MemoryError, Some(format!("vsh {exceeded}"))));
        }
        self.text.push_str(piece);
        self.total = attempted;
        Ok(())
    }
}

impl PrintWriterCallback for OutputSink {
    fn stdout_write(&mut self, output: Cow<'_, str>) -> Result<(), MontyException> {
        self.append(&output)
    }

    fn stdout_push(&mut self, end: char) -> Result<(), MontyException> {
        let mut buffer = [0u8; 4];
        self.append(end.encode_utf8(&mut buffer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_is_refused_and_remembered() {
        let mut sink = OutputSink::new(4);
        sink.stdout_write(Cow::Borrowed("abc")).unwrap();
        let error = sink.stdout_write(Cow::Borrowed("de")).unwrap_err();
        assert_eq!(error.exc_type(), ExcType::MemoryError);
        sink.stdout_push('\n').unwrap();
        assert_eq!(sink.overflow(), Some(LimitExceeded { limit: LimitKind::OutputBytes, attempted: 5, max: 4 }));
        assert_eq!(sink.take_text(), "abc\n");
    }

    #[test]
    fn pending_text_is_taken_while_the_count_keeps_growing() {
        let mut sink = OutputSink::new(6);
        sink.stdout_write(Cow::Borrowed("abc")).unwrap();
        assert_eq!(sink.take_pending(), "abc");
        sink.stdout_write(Cow::Borrowed("de")).unwrap();
        assert_eq!(sink.len(), 5);
        assert!(sink.stdout_write(Cow::Borrowed("fg")).is_err(), "the cap counts what was already sent");
        assert_eq!(sink.take_pending(), "de");
    }
}
