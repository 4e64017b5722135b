//! Rendering receipts as text for people and as JSON for programs.

use std::fmt::Write as _;

use vsh::{NoHunks, NodeState, Receipt, RuntimeDecision};

/// An error and its sources, one per line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let _ = write!(text, "\n  caused by: {cause}");
        source = cause.source();
    }
    text
}

/// `ms` (milliseconds since the Unix epoch) in local time.
pub(crate) fn local_time(ms: u64) -> String {
    use chrono::TimeZone as _;
    i64::try_from(ms)
        .ok()
        .and_then(|ms| chrono::Local.timestamp_millis_opt(ms).single())
        .map_or_else(|| format!("{ms} ms after the epoch"), |time| time.format("%Y-%m-%d %H:%M:%S %Z").to_string())
}

/// How far `at` is from `now` (milliseconds), as a person says it: "in 14 min", "3 s ago".
pub(crate) fn relative(at: u64, now: u64) -> String {
    // Less than a second ahead is now (a record changed after `now` was
    // read, within the same command: ux63 "last changed in 0 s").
    let (span, future) = if at > now.saturating_add(999) { (at - now, true) } else { (now.saturating_sub(at), false) };
    let seconds = span / 1000;
    let amount = match seconds {
        0..60 => format!("{seconds} s"),
        60..3600 => format!("{} min", seconds / 60),
        3600..86_400 => format!("{} h {} min", seconds / 3600, seconds % 3600 / 60),
        _ => format!("{} d {} h", seconds / 86_400, seconds % 86_400 / 3600),
    };
    if future { format!("in {amount}") } else { format!("{amount} ago") }
}

/// A stored transaction's record, for `vsh show`: its state, when it was made,
/// who approved it and until when, and when it expires.
pub(crate) fn record_text(record: &vsh::TransactionRecord, approver: Option<&str>, now: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "record       {}, made {} ({}), last changed {}",
        record.state.name(),
        local_time(record.created_ms),
        relative(record.created_ms, now),
        relative(record.updated_ms, now)
    );
    if let Some(grant) = &record.approval {
        let window = if record.state == vsh::TransactionState::Approved {
            format!("valid until {} ({})", local_time(grant.expires_ms()), relative(grant.expires_ms(), now))
        } else {
            format!("{}, no longer needed", record.state.name())
        };
        let by = approver.map_or_else(String::new, |name| format!("{} ", shown(name, false)));
        let _ = writeln!(
            out,
            "approved     by {by}(principal {}) at {}, {window}",
            grant.principal().short(),
            local_time(grant.issued_ms()),
        );
    }
    // Only work that still waits expires.
    let waiting = matches!(
        record.state,
        vsh::TransactionState::PendingApproval | vsh::TransactionState::Approved | vsh::TransactionState::AutoApproved
    );
    if let Some(expires) = record.pending_expires_ms.filter(|_| waiting) {
        let _ = writeln!(out, "expires      {} ({})", local_time(expires), relative(expires, now));
    }
    out
}

/// A transaction's state history, for `vsh show`: when it entered each state.
pub(crate) fn history_text(history: &[vsh::lower::vsh_store::RecordVersion], now: u64) -> String {
    let mut out = String::new();
    let states = vsh::document::HistoryDocument::states(history);
    if states.is_empty() {
        return out;
    }
    let _ = writeln!(out, "{}", paint(style::STRONG, "history"));
    if states.first().is_some_and(|first| first.carried_over) {
        let _ = writeln!(out, "  (earlier states were compacted away)");
    }
    for state in &states {
        let by = state.principal.as_ref().map(|principal| format!(" by {}", &principal[..12])).unwrap_or_default();
        let _ =
            writeln!(out, "  {}  {:<16}{by} ({})", local_time(state.at_ms), state.state, relative(state.at_ms, now));
    }
    out
}

/// One row of `vsh pending`.
pub(crate) struct PendingRow {
    pub(crate) record: vsh::TransactionRecord,
    pub(crate) receipt: Option<Receipt>,
    pub(crate) intent: String,
    /// What the intent column shows, escaped so it can never draw a row of
    /// its own: the intent, else a real command's command line after `$ `
    /// (so a row of `vsh exec` says what ran), as a shell would read it.
    pub(crate) label: String,
    /// A real command's argv, for the JSON rows.
    pub(crate) command: Option<Vec<String>>,
    /// Made under a policy since replaced: approve refuses it, only a
    /// rerun makes it again (`policy-changed` among the flags).
    pub(crate) policy_changed: bool,
    /// The approver's name, where the workspace recorded it (ux68 M2).
    pub(crate) approver: Option<String>,
    /// The first work whose program this one ran again, when it is a rerun.
    pub(crate) rerun_of: Option<vsh::TransactionId>,
}

impl PendingRow {
    /// A row for `record`, labelled from its stored program when there is one.
    pub(crate) fn new(
        record: vsh::TransactionRecord,
        receipt: Option<Receipt>,
        stored: Option<&vsh::StoredProgram>,
    ) -> Self {
        let intent = stored.map(|stored| stored.intent.clone()).unwrap_or_default();
        let label = label_of(&intent, stored);
        let command = stored.and_then(vsh::StoredProgram::command_argv);
        Self { record, receipt, intent, label, command, policy_changed: false, approver: None, rerun_of: None }
    }
}

/// `record`'s document (`vsh.record/1`) with its stored program's intent,
/// command line and label, as the listings show it.
pub(crate) fn record_document(
    record: &vsh::TransactionRecord,
    receipt: Option<&Receipt>,
    stored: Option<&vsh::StoredProgram>,
) -> vsh::document::TransactionDocument {
    let intent = stored.map_or("", |stored| stored.intent.as_str());
    let mut document = vsh::document::TransactionDocument::new(record, receipt, intent).with_program(stored);
    document.label = label_of(intent, stored);
    document
}

/// What the listings show for work: its intent, else a real command's
/// command line after `$ `, else its program's first line that does
/// something after `# `; escaped so it can never draw a row of its own.
fn label_of(intent: &str, stored: Option<&vsh::StoredProgram>) -> String {
    match stored {
        // Quoted by shlex already: its backslashes are the shell's, so
        // only what could start a line or drive the terminal is escaped.
        Some(stored) if intent.is_empty() && stored.language == vsh::Language::Command => parse_command(&stored.code)
            .map_or_else(String::new, |command| format!("$ {}", shown(&command.line, true).replace('\t', "\\t"))),
        // A program without an intent: its first line that does
        // something (not an import), so the row says what it is.
        Some(stored) if intent.is_empty() => first_line(&stored.code),
        // An agent's text.
        _ => shown(intent, false).into_owned(),
    }
}

/// The first line of `code` that is neither blank, a comment nor an
/// import, as `# line`, cut at 60 characters; empty when there is none.
fn first_line(code: &str) -> String {
    // A block's opener alone (`try:`) or a shell's options say nothing of what it does.
    let says_nothing = |line: &str| {
        matches!(line.strip_suffix(':').map(str::trim_end), Some("try" | "else" | "finally"))
            || line.starts_with("set -")
            || line.starts_with("set +")
    };
    let Some(line) = code.lines().map(str::trim).find(|line| {
        !line.is_empty()
            && !line.starts_with('#')
            && !line.starts_with("import ")
            && !line.starts_with("from ")
            && !says_nothing(line)
    }) else {
        return String::new();
    };
    let cut: String = line.chars().take(60).collect();
    let more = if cut.len() < line.len() { "..." } else { "" };
    format!("# {}{more}", shown(&cut, true))
}

fn risk_flags(receipt: Option<&Receipt>) -> Vec<String> {
    match receipt.map(|receipt| &receipt.decision) {
        Some(RuntimeDecision::PendingApproval(manifest)) => {
            manifest.flags.iter().map(|flag| flag.name().to_owned()).collect()
        }
        _ => Vec::new(),
    }
}

/// `vsh pending` as a table: short id, when it was made, state, paths changed, risk flags, intent.
pub(crate) fn pending_table(rows: &[PendingRow], now: u64) -> String {
    let flags: Vec<String> = rows
        .iter()
        .map(|row| {
            let mut flags = risk_flags(row.receipt.as_ref());
            if row.policy_changed {
                flags.insert(0, "policy-changed".to_owned());
            }
            flags.join(",")
        })
        .collect();
    // As wide as the widest row's flags: the intent column stays in line.
    let width = flags.iter().map(String::len).max().unwrap_or(0).max("flags".len());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        paint(
            style::STRONG,
            &format!("{:<12}  {:<12}  {:<16}  {:>5}  {:<width$}  intent", "id", "when", "state", "paths", "flags")
        )
    );
    for (row, flags) in rows.iter().zip(&flags) {
        let when = relative(row.record.created_ms, now);
        let paths = row.receipt.as_ref().map_or_else(|| "-".to_owned(), |receipt| receipt.changed_paths.to_string());
        let _ = writeln!(
            out,
            "{:<12}  {when:<12}  {:<16}  {paths:>5}  {}  {}",
            row.record.id.short(),
            row.record.state.name(),
            // Padded before it is styled, so the column holds with or without colour.
            paint(style::FLAG, &format!("{flags:<width$}")),
            row.label
        );
    }
    out
}

/// `vsh log` as a table: when it finished, short id, state, paths changed, intent.
/// An approver's name as the log's column shows it: escaped, at most 12
/// characters (the eleventh and twelfth give way to `…` when longer).
fn approver_column(name: &str) -> String {
    let name = shown(name, false);
    if name.chars().count() <= 12 {
        name.into_owned()
    } else {
        format!("{}…", name.chars().take(11).collect::<String>())
    }
}

pub(crate) fn log_table(rows: &[PendingRow], now: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        paint(
            style::STRONG,
            &format!("{:<12}  {:<12}  {:<10}  {:>5}  {:<12}  intent", "id", "when", "state", "paths", "approver")
        )
    );
    for row in rows {
        let paths = row.receipt.as_ref().map_or_else(|| "-".to_owned(), |receipt| receipt.changed_paths.to_string());
        let state = format!("{:<10}", row.record.state.name());
        let state = match row.record.state {
            vsh::TransactionState::Committed => paint(style::APPROVED, &state),
            vsh::TransactionState::Denied | vsh::TransactionState::Failed => paint(style::DENIED, &state),
            _ => paint(style::PENDING, &state),
        };
        let approver = match (&row.approver, &row.record.approval) {
            (Some(name), Some(_)) => approver_column(name),
            (None, Some(grant)) => grant.principal().short(),
            (_, None) => "-".to_owned(),
        };
        // Denied work says why.
        let why = match row.receipt.as_ref().map(|receipt| &receipt.decision) {
            Some(RuntimeDecision::Denied(manifest)) => format!("  [{}]", manifest.reason.name()),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "{:<12}  {:<12}  {state}  {paths:>5}  {approver:<12}  {}{why}",
            row.record.id.short(),
            relative(row.record.updated_ms, now),
            row.label
        );
    }
    out
}

/// `bytes` as a person reads a size: exact below 1 KiB, else to a tenth
/// of its unit.
fn about_bytes(bytes: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let value = bytes as f64;
    match bytes {
        0..1024 => format!("{bytes} bytes"),
        1024..1_048_576 => format!("{:.1} KiB", value / 1024.0),
        1_048_576..1_073_741_824 => format!("{:.1} MiB", value / 1_048_576.0),
        _ => format!("{:.1} GiB", value / 1_073_741_824.0),
    }
}

/// What `vsh gc` removed, and what it kept and why (ux85 L6: "removed 0"
/// of 236 MB said nothing of why, nor until when), at `now_ms`.
pub(crate) fn gc_text(report: &vsh::GcReport, now_ms: u64) -> String {
    let scratch = &report.scratch;
    let scratch = if scratch.busy {
        "scratch directories in use by a run, left alone".to_owned()
    } else if scratch.bytes_removed == u64::MAX {
        // `u64::MAX`: a tree too deep, or under a name too odd, to measure.
        format!("cleared scratch directories {} (a tree vsh could not measure)", scratch.cleared.join(", "))
    } else if scratch.bytes_removed > 0 {
        format!("cleared scratch directories {} ({})", scratch.cleared.join(", "), about_bytes(scratch.bytes_removed))
    } else {
        format!("scratch directories hold {}", about_bytes(scratch.bytes))
    };
    let mut kept = Vec::new();
    if report.blobs_in_use > 0 {
        kept.push(format!(
            "{} needed by work on record (waiting work, reverts of committed work)",
            report.blobs_in_use
        ));
    }
    if report.blobs_in_grace > 0 {
        let due = report.next_due_ms.map_or(String::new(), |due| {
            format!(
                ", the first of them free to go in {}",
                spaced_duration(std::time::Duration::from_secs(due.saturating_sub(now_ms).div_ceil(60_000) * 60,))
            )
        });
        kept.push(format!("{} within the grace (--grace){due}", report.blobs_in_grace));
    }
    let kept = if kept.is_empty() { String::new() } else { format!(" (kept: {})", kept.join("; ")) };
    format!(
        "expired {} transactions, forgot {} finished ones{}; removed {} of {} blobs examined{kept} and {} temporary \
         files; {scratch}\n",
        report.expired.len(),
        report.forgotten.len(),
        if report.compacted { ", compacted the log" } else { "" },
        report.blobs_removed,
        report.blobs_examined,
        report.temporaries_removed
    )
}

/// A stored transaction's intent and program, for `vsh show`.
pub(crate) fn program_text(stored: &vsh::StoredProgram) -> String {
    let mut out = String::new();
    if !stored.intent.is_empty() {
        let _ = writeln!(out, "intent       {}", shown(&stored.intent, true));
    }
    if stored.language == vsh::Language::Command
        && let Some(command) = command_line(&stored.code)
    {
        out.push_str(&command);
        return out;
    }
    let _ = writeln!(out, "{}", paint(style::STRONG, "program"));
    for line in stored.code.split_terminator('\n') {
        let _ = writeln!(out, "  | {}", shown(line, true));
    }
    out
}

/// A real command as its program text gives it (its argv as JSON, or
/// `{"argv", "cwd", "stdin"}`), with its argv quoted as a shell reads it.
struct Command {
    line: String,
    cwd: String,
    stdin: String,
}

/// The real command `code` is, or `None` when it is not one.
fn parse_command(code: &str) -> Option<Command> {
    #[derive(serde::Deserialize)]
    struct Text {
        argv: Vec<String>,
        #[serde(default)]
        cwd: String,
        #[serde(default)]
        stdin: String,
    }
    let text = serde_json::from_str::<Vec<String>>(code)
        .map(|argv| Text { argv, cwd: String::new(), stdin: String::new() })
        .or_else(|_| serde_json::from_str::<Text>(code))
        .ok()?;
    let line = shlex::try_join(text.argv.iter().map(String::as_str)).ok()?;
    Some(Command { line, cwd: text.cwd, stdin: text.stdin })
}

/// A real command's program text as a reviewer reads it: the command line
/// quoted as a shell would read it, where it started, and its standard
/// input. `None` when the text is not such a command.
fn command_line(code: &str) -> Option<String> {
    let command = parse_command(code)?;
    let mut out = format!("{}      {}\n", paint(style::STRONG, "program"), shown(&command.line, true));
    if !command.cwd.is_empty() {
        let _ = writeln!(out, "in           {}", shown(&command.cwd, true));
    }
    if !command.stdin.is_empty() {
        let _ = writeln!(out, "{}", paint(style::STRONG, "stdin"));
        for line in command.stdin.split_terminator('\n') {
            let _ = writeln!(out, "  | {}", shown(line, true));
        }
    }
    Some(out)
}

/// The transactions an ambiguous prefix matched, one a line, and how many
/// more there are.
pub(crate) fn candidates_text(candidates: &[vsh::TransactionId], total: usize) -> String {
    let mut text = String::from("vsh: the candidates are:\n");
    for candidate in candidates {
        let _ = writeln!(text, "  {candidate}");
    }
    if total > candidates.len() {
        let _ = writeln!(text, "  ... and {} more", total - candidates.len());
    }
    text.push_str("vsh: give more hex digits\n");
    text
}

/// A stale commit's conflicting paths, one a line, with what changed, and how
/// many more there are beyond the listed ones.
/// `again`: whether to say the work is to be made again (not when the
/// workspace holds its changes already).
pub(crate) fn stale_text(conflicts: &[vsh::lower::vsh_commit::Conflict], total: usize, again: bool) -> String {
    const LISTED: usize = 10;
    let mut text = String::from("vsh: the workspace changed under the transaction:\n");
    // The first few, then how many more (ux83: 128 lines came before the
    // conclusion).
    let conflicts = &conflicts[..conflicts.len().min(LISTED)];
    for conflict in conflicts {
        let what = conflict.reason.to_string();
        let path = if conflict.path.is_root() { "(the workspace's root)" } else { conflict.path.as_str() };
        let _ = writeln!(text, "  {}  {what}", shown(path, false));
    }
    if total > conflicts.len() {
        let _ = writeln!(text, "  ... and {} more", total - conflicts.len());
    }
    if again {
        text.push_str(
            "vsh: it can never be committed as it is: make it again on the current workspace (a new transaction)\n",
        );
    }
    text
}

/// Whether `receipt`'s work waited for a reviewer and has been approved
/// since (ux75 L9: a committed receipt read "decision pending-approval"
/// alone, as if it still waited).
fn was_reviewed(receipt: &Receipt) -> bool {
    matches!(receipt.decision, RuntimeDecision::PendingApproval(_))
        && matches!(
            receipt.state,
            vsh::TransactionState::Approved
                | vsh::TransactionState::Reserved
                | vsh::TransactionState::Revalidating
                | vsh::TransactionState::Committing
                | vsh::TransactionState::Committed
        )
}

fn decision_name(decision: &RuntimeDecision) -> &'static str {
    match decision {
        RuntimeDecision::Denied(_) => "denied",
        RuntimeDecision::AutoApproved => "auto-approved",
        RuntimeDecision::PendingApproval(_) => "pending-approval",
    }
}

pub(crate) fn state_text(state: Option<&NodeState>) -> String {
    state.map_or_else(
        || "-".to_owned(),
        |state| {
            let content = match (state.content, state.stamp) {
                (Some(id), _) => format!(" {}", id.short()),
                (None, Some(_)) => " unread".to_owned(),
                (None, None) => String::new(),
            };
            format!("{} {:o} {}B{content}", state.kind.name(), state.mode, state.size)
        },
    )
}

/// The receipt's timings line: each stage that took time (a stored
/// receipt has no timings of its own, they were its run's, and the commit
/// of stored work timed only its commit; a wait only when there was one).
fn timings_text(out: &mut String, t: &vsh::StageTimings) {
    let stages = [
        ("wait", t.wait),
        ("execute", t.execute),
        ("diff", t.diff),
        ("policy", t.policy),
        ("bind", t.bind_and_store),
        ("commit", t.commit),
        ("total", t.total),
    ];
    if t.total > 0 {
        let timed: Vec<String> = stages
            .iter()
            .filter(|(name, nanos)| *nanos > 0 || t.execute > 0 && !matches!(*name, "commit" | "wait"))
            .map(|(name, nanos)| format!("{name} {}", human_duration(*nanos)))
            .collect();
        let _ = writeln!(out, "timings      {}", timed.join(", "));
    }
}

/// `count` and `noun`, plural unless it is one (`dependency` becomes
/// `dependencies`).
pub(crate) fn counted(count: u64, noun: &str) -> String {
    match (count, noun.strip_suffix('y')) {
        (1, _) => format!("1 {noun}"),
        (_, Some(stem)) => format!("{count} {stem}ies"),
        _ => format!("{count} {noun}s"),
    }
}

/// `text` as a reviewer's terminal must show it: every control character
/// (a newline or carriage return in a file name, an escape sequence, DEL,
/// C1) and every character that changes how text reads without showing
/// itself (bidirectional controls, zero-width characters, line separators:
/// `vsh_vfs::hides_text`) written as an escape (`\n`, `\x1b`, `\u{202e}`), so a path or a line of content cannot start a
/// line of its own, move the cursor, or reorder what is shown: a file named
/// to look like two entries of a review shows as one. With `keep_tabs`
/// (content lines) a tab stays a tab; in a path (`keep_tabs` false) a
/// backslash is doubled, so an escape in a name is told from the same
/// characters typed, and a name not in composed form (NFC) has its
/// combining marks escaped.
pub(crate) fn shown(text: &str, keep_tabs: bool) -> std::borrow::Cow<'_, str> {
    // A path not in composed form (NFC) has its combining marks escaped:
    // `e\u{301}.txt` beside `é.txt`, never two names that look alike (sec80
    // F5: a decomposed twin of a file was shown as the same name).
    let decomposed = !keep_tabs && !unicode_normalization::is_nfc(text);
    let escaped = |c: char| {
        (c.is_control() && !(keep_tabs && c == '\t'))
            || vsh::lower::vsh_vfs::hides_text(c)
            || (!keep_tabs && c == '\\')
            || (decomposed && unicode_normalization::char::canonical_combining_class(c) != 0)
    };
    if !text.chars().any(escaped) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' if !keep_tabs => out.push_str("\\\\"),
            '\n' if escaped(c) => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' if escaped(c) => out.push_str("\\t"),
            c if escaped(c) && u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if escaped(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The styles of a text receipt. Text is always rendered with them; the
/// stream it is printed through (`anstream`) keeps or strips them by
/// `--color`, `NO_COLOR`, `CLICOLOR_FORCE` and whether it is a terminal.
mod style {
    use anstyle::{AnsiColor, Style};

    pub(super) const ADDED: Style = AnsiColor::Green.on_default();
    pub(super) const REMOVED: Style = AnsiColor::Red.on_default();
    pub(super) const HUNK: Style = AnsiColor::Cyan.on_default();
    pub(super) const STRONG: Style = Style::new().bold();
    pub(super) const DENIED: Style = AnsiColor::Red.on_default().bold();
    pub(super) const PENDING: Style = AnsiColor::Yellow.on_default().bold();
    pub(super) const APPROVED: Style = AnsiColor::Green.on_default().bold();
    pub(super) const FLAG: Style = AnsiColor::Yellow.on_default();
}

/// `text` in `style`.
fn paint(style: anstyle::Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

/// The style of a decision.
fn decision_style(decision: &RuntimeDecision) -> anstyle::Style {
    match decision {
        RuntimeDecision::Denied(_) => style::DENIED,
        RuntimeDecision::AutoApproved => style::APPROVED,
        RuntimeDecision::PendingApproval(_) => style::PENDING,
    }
}

/// A duration in nanoseconds, in the unit a person reads best.
/// `duration` as humantime writes it, each number apart from its unit and
/// a minute `min` (`1 day 2 h`, `15 min`, not `1day 2h`, `15m`: ux83 read
/// "for 1day" as a typo).
pub(crate) fn spaced_duration(duration: std::time::Duration) -> String {
    humantime::format_duration(duration)
        .to_string()
        .split(' ')
        .map(|part| match part.find(|c: char| !c.is_ascii_digit()) {
            // `m` is humantime's minute.
            Some(at) if at > 0 && &part[at..] == "m" => format!("{} min", &part[..at]),
            Some(at) if at > 0 => format!("{} {}", &part[..at], &part[at..]),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn human_duration(ns: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let value = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", value / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.1} ms", value / 1e6)
    } else {
        format!("{:.2} s", value / 1e9)
    }
}

fn no_hunks_reason(reason: NoHunks) -> &'static str {
    match reason {
        NoHunks::NotFileContent => "no text change",
        NoHunks::Binary => "binary content",
        NoHunks::TooLarge => "too large to show",
        NoHunks::BudgetSpent => "review budget spent",
        NoHunks::Unavailable => "its content is not available: not kept, or no longer in the workspace",
        NoHunks::Protected => "protected content",
        NoHunks::Renamed => "renamed: its change is shown at the path it moved to (`rename from` names this one)",
    }
}

/// The review block: the decision, why, and every change with its text hunks.
/// Deterministic for a given program and workspace (no ids, no timings).
pub(crate) fn review_text(receipt: &Receipt) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", paint(style::STRONG, "review"));
    let decision = |text: &str| paint(decision_style(&receipt.decision), text);
    let _ = match &receipt.decision {
        RuntimeDecision::AutoApproved => writeln!(out, "  decision: {}", decision("auto-approved")),
        RuntimeDecision::PendingApproval(manifest) => {
            let flags: Vec<String> = manifest.flags.iter().map(|flag| paint(style::FLAG, flag.name())).collect();
            // What became of it since, where it is no longer waiting (ux57).
            let since = match receipt.state {
                vsh::TransactionState::Approved => ", then approved",
                vsh::TransactionState::Committed => ", then approved and committed",
                _ => "",
            };
            writeln!(out, "  decision: {} (risk: {}){since}", decision("pending approval"), flags.join(", "))
        }
        RuntimeDecision::Denied(manifest) => {
            let _ = writeln!(out, "  decision: {} ({})", decision("denied"), manifest.reason.name());
            for denied in &manifest.denied {
                let line = denied.to_string();
                let _ = writeln!(out, "    {}", shown(&line, true));
                // The line says the remedy already where it has one.
                if !denied.remedy.is_empty() && !line.contains(&denied.remedy) {
                    let _ = writeln!(out, "      to allow it: {}", shown(&denied.remedy, true));
                }
            }
            if manifest.denied.is_empty() && !manifest.remedy.is_empty() {
                let _ = writeln!(out, "    to allow it: {}", shown(&manifest.remedy, true));
            }
            Ok(())
        }
    };
    for (entry, review) in receipt.changes.iter().zip(&receipt.review) {
        let _ = writeln!(
            out,
            "  {} {}  [{} -> {}]",
            paint(style::STRONG, &format!("{:<6}", entry.kind.name())),
            shown(entry.path.as_str(), false),
            state_text(entry.before.as_ref()),
            state_text(entry.after.as_ref())
        );
        match &review.hunks {
            Ok(text) => {
                for line in text.split_terminator('\n') {
                    let line_style = if line.starts_with("@@") {
                        Some(style::HUNK)
                    } else if line.starts_with('+') && !line.starts_with("+++") {
                        Some(style::ADDED)
                    } else if line.starts_with('-') && !line.starts_with("---") {
                        Some(style::REMOVED)
                    } else {
                        None
                    };
                    let line = shown(line, true);
                    let painted = line_style.map_or_else(|| line.to_string(), |line_style| paint(line_style, &line));
                    let _ = writeln!(out, "    {painted}");
                }
            }
            Err(reason) => {
                let reason = match reason {
                    // Committed: the old bytes were replaced in the workspace, and vsh keeps none.
                    NoHunks::Unavailable if receipt.state == vsh::TransactionState::Committed => {
                        "its old content is kept a day after the commit, up to 1 MiB a file and 16 MiB in all, and \
                         only where the program could read it: not here now"
                    }
                    other => no_hunks_reason(*other),
                };
                let _ = writeln!(out, "    ({reason})");
            }
        }
    }
    out
}

/// A diff's measurements, in one line.
fn metrics_text(m: &vsh::RiskMetrics) -> String {
    let mut text = format!(
        "{} touched ({} created, {} modified, {} deleted), {} B changed",
        m.touched, m.created, m.modified, m.deleted, m.changed_bytes
    );
    for (count, what) in [
        (m.renamed, "renamed"),
        (m.executable_changes, "executable changes"),
        (m.symlink_changes, "symlink changes"),
        (m.mode_changes, "mode-only changes"),
        (m.rewritten, "rewritten"),
    ] {
        if count > 0 {
            let _ = write!(text, ", {count} {what}");
        }
    }
    if m.delete_ratio_bps > 0 {
        let _ = write!(text, ", deletes {:.1}% of what it observed", f64::from(m.delete_ratio_bps) / 100.0);
    }
    text
}

/// A stream of more lines than this shows its first [`OUTPUT_HEAD_LINES`]
/// and last [`OUTPUT_TAIL_LINES`] in a receipt.
const MAX_OUTPUT_LINES: usize = 200;
/// The first lines of a long stream a receipt shows.
const OUTPUT_HEAD_LINES: usize = 40;
/// The last lines of a long stream a receipt shows (a test run's summary).
const OUTPUT_TAIL_LINES: usize = 100;

/// A readable, multi-line receipt, styled (see [`style`]).
/// The program's streams, its value (Monty) or its profile and status (Bash).
/// Returns how many lines of the program's streams it shows.
fn output_text(out: &mut String, output: &vsh::ExecutionOutput, receipt_withheld: bool) -> usize {
    let mut shown_lines = 0;
    for (name, bytes) in [("stdout", output.stdout_bytes()), ("stderr", output.stderr_bytes())] {
        let text = String::from_utf8_lossy(bytes);
        if !text.is_empty() {
            let _ = writeln!(out, "{name}");
            let lines: Vec<&str> = text.split_terminator('\n').collect();
            // A long output shows its head and its tail: the receipt around
            // it stays on the screen (ux58 4: 78,000 lines scrolled it away).
            let (head, tail) =
                if lines.len() > MAX_OUTPUT_LINES { (OUTPUT_HEAD_LINES, OUTPUT_TAIL_LINES) } else { (lines.len(), 0) };
            for line in &lines[..head] {
                let _ = writeln!(out, "  | {}", shown(line, true));
            }
            if tail > 0 {
                let _ = writeln!(
                    out,
                    "  | {}",
                    paint(
                        style::STRONG,
                        &format!(
                            "[{} lines not shown here: --json holds all vsh kept of {name}; vsh exec --raw prints \
                             a command's own output]",
                            lines.len() - head - tail
                        )
                    )
                );
                for line in &lines[lines.len() - tail..] {
                    let _ = writeln!(out, "  | {}", shown(line, true));
                }
            }
            shown_lines += head + tail;
        }
    }
    if let Some(value) = output.monty_value() {
        let _ = writeln!(out, "value        {}", value.py_repr());
    }
    if let Some(exception) = output.exception() {
        let _ = writeln!(out, "{}", paint(style::STRONG, "raised"));
        for line in exception.split_terminator('\n') {
            let _ = writeln!(out, "  | {}", shown(line, true));
        }
    }
    if let vsh::ExecutionOutput::Bash(result) = output {
        let label = if result.profile == vsh::lower::vsh_monty::COMMAND_PROFILE { "command" } else { "bash" };
        let status = if receipt_withheld { "(withheld)".to_owned() } else { result.exit_code.to_string() };
        let _ = writeln!(out, "{label:<12} exited {status} (profile {})", result.profile);
    }

    if let vsh::ExecutionOutput::Session { steps } = output {
        for (index, step) in steps.iter().enumerate() {
            if step.kind == vsh::StepKind::Revert {
                // Its program is the reverted transaction's id.
                let _ = writeln!(
                    out,
                    "step {:<7} revert of {}: what it replaced, put back",
                    index + 1,
                    shown(step.program.get(..12).unwrap_or(&step.program), true)
                );
                continue;
            }
            let kept = if step.kept { "kept" } else { "undone" };
            let unisolated = if step.unisolated { ", unisolated" } else { "" };
            let _ = writeln!(
                out,
                "step {:<7} {} exited {} ({kept}{unisolated}): {}",
                index + 1,
                step.kind.name(),
                step.exit_code,
                shown(&step.program, true)
            );
        }
    }
    shown_lines
}

/// What a run's real commands were granted beyond the defaults, one line.
pub(crate) fn grants_text(grants: &vsh::CommandGrants) -> String {
    let mut parts = Vec::new();
    if !grants.env.is_empty() {
        parts.push(format!("env {}", grants.env.join(", ")));
    }
    if grants.network != "none" {
        parts.push(format!("network {}", grants.network));
    }
    if !grants.ports.is_empty() {
        let numbers: Vec<String> = grants.ports.iter().map(u16::to_string).collect();
        parts.push(format!("ports {}", numbers.join(", ")));
    }
    if grants.unix_sockets {
        parts.push("unix sockets".to_owned());
    }
    if !grants.tools.is_empty() {
        parts.push(format!("tools {}", grants.tools.join(", ")));
    }
    shown(&parts.join("; "), true).into_owned()
}

/// A receipt in one line: its transaction, state, changed paths and what
/// to do next (`vsh exec --raw`).
pub(crate) fn outcome_line(receipt: &Receipt) -> String {
    let paths = receipt.changed_paths;
    let mut line = format!(
        "transaction {} is {}, {paths} changed path{}",
        receipt.transaction.short(),
        receipt.state.name(),
        if paths == 1 { "" } else { "s" }
    );
    if let vsh::ExecutionOutput::Bash(result) = &receipt.output
        && result.exit_code != 0
        && !receipt.output_withheld()
    {
        let _ = write!(line, ", the program exited {}", result.exit_code);
    }
    if let Some(next) = next_step(receipt) {
        line.push_str("; next: ");
        line.push_str(&next);
    }
    line
}

/// For denied work, one line: the transaction, the reason and the first
/// refused access with how to allow it (`--quiet`'s only output for it).
pub(crate) fn denial_line(receipt: &Receipt) -> Option<String> {
    let RuntimeDecision::Denied(manifest) = &receipt.decision else { return None };
    let mut line = format!("transaction {} is denied ({})", receipt.transaction.short(), manifest.reason.name());
    if let Some(first) = manifest.denied.first() {
        let _ = write!(line, ": {}", shown(&first.to_string(), true));
        if manifest.denied.len() > 1 {
            let _ = write!(line, " (and {} more: vsh show {})", manifest.denied.len() - 1, receipt.transaction.short());
        }
    } else if !manifest.remedy.is_empty() {
        let _ = write!(line, "; to allow it: {}", shown(&manifest.remedy, true));
    }
    Some(line)
}

/// What to do next with the work a receipt describes, if anything.
/// Whether `receipt`'s work waits for a reviewer with `flag` among its risks.
fn has_flag(receipt: &Receipt, flag: vsh::RiskFlag) -> bool {
    matches!(&receipt.decision, RuntimeDecision::PendingApproval(manifest) if manifest.flags.contains(&flag))
}

pub(crate) fn next_step(receipt: &Receipt) -> Option<String> {
    let short = receipt.transaction.short();
    match receipt.state {
        // Approving unseen-change work drops a change someone made: say so
        // with the step (ux70 F6).
        vsh::TransactionState::PendingApproval if has_flag(receipt, vsh::RiskFlag::UnseenChange) => Some(format!(
            "vsh show {short}: approving commits the diff as shown, losing any change named above it does not \
             keep; vsh reject {short} keeps them (then rewrite from a fresh read)"
        )),
        vsh::TransactionState::PendingApproval => Some(format!("vsh approve {short} && vsh commit {short}")),
        // A run that changed nothing has nothing to commit.
        vsh::TransactionState::AutoApproved | vsh::TransactionState::Approved if receipt.changed_paths == 0 => {
            Some("nothing: it changes no path (so it is not kept: vsh show will not find it)".to_owned())
        }
        vsh::TransactionState::AutoApproved | vsh::TransactionState::Approved => Some(format!("vsh commit {short}")),
        // Never committable now: its program can run again on the workspace
        // as it is (a failed commit was rolled back, its changes undone).
        // A revert is made again by reverting again (a session does not
        // run again: ux67 F3).
        vsh::TransactionState::Stale | vsh::TransactionState::Expired | vsh::TransactionState::Failed => {
            Some(reverted_by(receipt).map_or_else(
                || format!("vsh rerun {short}"),
                |of| format!("vsh revert {}", of.get(..12).unwrap_or(of)),
            ))
        }
        // A commit interrupted while someone else changed its paths: only
        // an operator settles it (ux68 M4: no step was named).
        vsh::TransactionState::RecoveryRequired => Some(format!("vsh recover --restore {short}")),
        // Nothing: how to undo it, should it be wrong (ux66 F7).
        vsh::TransactionState::Committed if receipt.changed_paths > 0 => {
            Some(format!("done; to undo it: vsh revert {short}"))
        }
        _ => None,
    }
}

/// The transaction `receipt`'s work reverts, when it is a revert (its one
/// step's program is that transaction's id).
pub(crate) fn reverted_by(receipt: &Receipt) -> Option<&str> {
    match &receipt.output {
        vsh::ExecutionOutput::Session { steps } => {
            steps.iter().find(|step| step.kind == vsh::StepKind::Revert).map(|step| step.program.as_str())
        }
        _ => None,
    }
}

/// What to do next for a JSON document: `next` when the caller knows
/// better (a rerun), else the receipt's; only a command, never a sentence.
pub(crate) fn json_next(receipt: &Receipt, next: Option<String>) -> Option<String> {
    if next.is_none()
        && receipt.state == vsh::TransactionState::PendingApproval
        && has_flag(receipt, vsh::RiskFlag::UnseenChange)
    {
        // Review first: approving drops a change (the text says which).
        return Some(format!("vsh show {}", receipt.transaction.short()));
    }
    // A command with why after it (`vsh show X (why)`): the command.
    next.or_else(|| next_step(receipt)).filter(|next| next.starts_with("vsh ")).map(|next| {
        match next.split_once(" (") {
            Some((command, _)) => command.to_owned(),
            None => next,
        }
    })
}

/// Pending work a listing found stale (and recorded so), in one line: what
/// changed under it, and what to do.
/// `then`: what to do about it (`vsh rerun TX`, a revert's `vsh revert`,
/// or that nothing is left to do: ux83 M2, it always said `vsh rerun`).
pub(crate) fn found_stale_text(found: &vsh::FoundStale, then: &str) -> String {
    let changed = match &found.stale {
        vsh::lower::vsh_commit::CommitError::Stale { conflicts, total } => {
            let mut listed: Vec<String> = conflicts
                .iter()
                .take(3)
                .map(|conflict| format!("{}: {}", shown(conflict.path.as_str(), false), conflict.reason))
                .collect();
            if *total > listed.len() {
                listed.push(format!("and {} more", total - listed.len()));
            }
            listed.join("; ")
        }
        other => other.to_string(),
    };
    format!(
        "{} went stale, and is recorded so: the workspace changed under it since its run ({changed}); it can \
         never be committed: {then}",
        found.transaction.short()
    )
}

/// The changed paths a text receipt without its review lists, at most.
const MAX_LISTED_CHANGES: usize = 50;

pub(crate) fn receipt_text(receipt: &Receipt) -> String {
    receipt_text_next(receipt, next_step(receipt))
}

/// [`receipt_text`] with `next` as what to do next (a review that knows
/// more than the receipt: the policy changed since it was made).
pub(crate) fn receipt_text_next(receipt: &Receipt, next: Option<String>) -> String {
    receipt_text_listing(receipt, next, MAX_LISTED_CHANGES)
}

/// Whether `warning` says why work waits for a reviewer (the numbers of a
/// rewrite, the review rules that hold it, what earlier commits took): the
/// text receipt shows it in its decision, not among the warnings.
pub(crate) fn is_decision_note(warning: &vsh::Warning) -> bool {
    matches!(
        warning,
        vsh::Warning::Rewritten { .. }
            | vsh::Warning::ReviewRules { .. }
            | vsh::Warning::EarlierLosses { .. }
            | vsh::Warning::UnseenChanges { .. }
            | vsh::Warning::Renamed { .. }
    )
}

/// [`receipt_text_next`] listing at most `max_listed` changed paths when it
/// has no review (`vsh show --stat`: every one).
pub(crate) fn receipt_text_listing(receipt: &Receipt, next: Option<String>, max_listed: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "transaction  {}", receipt.transaction);
    if receipt.snapshot_withheld {
        let _ = writeln!(out, "snapshot     withheld (the run read what this policy protects)");
    } else {
        let _ = writeln!(out, "snapshot     {}", receipt.base_snapshot);
    }
    let _ = writeln!(out, "state        {}", receipt.state.name());
    let _ = writeln!(
        out,
        "decision     {}{}",
        paint(decision_style(&receipt.decision), decision_name(&receipt.decision)),
        if was_reviewed(receipt) { ", then approved by a reviewer" } else { "" }
    );
    match &receipt.decision {
        RuntimeDecision::Denied(manifest) => {
            let _ = writeln!(out, "  reason     {}", manifest.reason.name());
            for denied in &manifest.denied {
                let _ = writeln!(out, "  denied     {}", shown(&denied.to_string(), true));
            }
            // A ceiling (too many deletions, too large a change) names no
            // access: its remedy is the threshold to raise.
            if manifest.denied.is_empty() && !manifest.remedy.is_empty() {
                let _ = writeln!(out, "  to allow   {}", shown(&manifest.remedy, true));
            }
        }
        RuntimeDecision::PendingApproval(manifest) => {
            let flags: Vec<String> = manifest.flags.iter().map(|flag| paint(style::FLAG, flag.name())).collect();
            let _ = writeln!(out, "  risk flags {}", flags.join(", "));
        }
        RuntimeDecision::AutoApproved => {}
    }
    // Why it waits, in the receipt itself (ux66 F3: on stderr after it,
    // `vsh show | less` lost it).
    for note in receipt.warnings.iter().filter(|warning| is_decision_note(warning)) {
        let _ = writeln!(out, "  why        {}", shown(&note.to_string(), true));
    }
    if let Some(next) = &next {
        let _ = writeln!(out, "  next       {next}");
    }
    if let RuntimeDecision::PendingApproval(vsh::RiskManifest { metrics, .. })
    | RuntimeDecision::Denied(vsh::DenyManifest { metrics, .. }) = &receipt.decision
    {
        let _ = writeln!(out, "  metrics    {}", metrics_text(metrics));
    }
    let _ = writeln!(
        out,
        "diff         {} ({} changed path{})",
        if receipt.diff_withheld {
            "withheld (it names what a read-protected path held)".to_owned()
        } else {
            receipt.diff.short()
        },
        receipt.changed_paths,
        if receipt.changed_paths == 1 { "" } else { "s" }
    );
    changes_listing(&mut out, receipt, max_listed);
    let printed = output_text(&mut out, &receipt.output, receipt.output_withheld());
    if let Some(grants) = receipt.grants.as_ref().filter(|grants| !grants.is_default()) {
        let _ = writeln!(out, "grants       {}", grants_text(grants));
    }
    let stats = &receipt.execution;
    if receipt.snapshot_withheld {
        let _ = writeln!(out, "execution    withheld (its counters measured what this policy protects)");
    } else {
        let _ = writeln!(
            out,
            "execution    {} os calls, {} B read, {} B written, {} denied, {} truncated result lists",
            stats.os_calls, stats.read_bytes, stats.write_bytes, stats.denied_accesses, stats.truncated_results
        );
    }
    if stats.skipped_nodes > 0 {
        let _ = writeln!(
            out,
            "skipped      {} the program could not be shown (a name not UTF-8, a FIFO, socket or device, a mount point)",
            counted(stats.skipped_nodes, "node")
        );
    }
    timings_text(&mut out, &receipt.timings);
    if let Some(commit) = &receipt.commit {
        let _ = writeln!(
            out,
            "commit       {}, {} verified, {} revalidated",
            counted(commit.operations, "operation"),
            counted(commit.verified_paths, "path"),
            counted(commit.revalidated_dependencies, "dependency")
        );
    }
    if !receipt.review.is_empty() {
        out.push_str(&review_text(receipt));
    }
    // Past a screen of output, what to do next is said again at the end.
    if printed > REPEAT_NEXT_AFTER_LINES
        && let Some(next) = next
    {
        let _ = writeln!(out, "next         {next}");
    }
    out
}

/// Without the review, the changed paths (a long list cut short at `max_listed`).
fn changes_listing(out: &mut String, receipt: &Receipt, max_listed: usize) {
    let listed = if receipt.review.is_empty() { receipt.changes.len() } else { 0 };
    for entry in receipt.changes.iter().take(listed.min(max_listed)) {
        let _ = writeln!(
            out,
            "  {:<7} {}  [{} -> {}]",
            entry.kind.name(),
            shown(entry.path.as_str(), false),
            state_text(entry.before.as_ref()),
            state_text(entry.after.as_ref())
        );
    }
    if listed > max_listed {
        let _ = writeln!(
            out,
            "  ... and {} more (vsh show {} lists them all, with their hunks)",
            listed - max_listed,
            receipt.transaction.short()
        );
    }
}

/// How many lines of program output push a receipt's `next` off a screen:
/// past them it is said again at the end.
const REPEAT_NEXT_AFTER_LINES: usize = 20;

/// What a recovery did, for people: a summary line, then one line per
/// transaction and per path an operator should know about.
pub(crate) fn recovery_text(report: &vsh::RecoveryReport) -> String {
    recovery_text_within(report, usize::MAX)
}

/// [`recovery_text`] listing at most `max_paths` of each unresolved
/// commit's paths, and how many more `vsh recover` lists: what every other
/// command says first, before its own output (sec50: hundreds of lines).
pub(crate) fn recovery_text_within(report: &vsh::RecoveryReport, max_paths: usize) -> String {
    let settled = report.settled_committed.len() + report.settled_failed.len();
    // A released commit is counted as what it is, not among those rolled
    // back (ux83 L2: "rolled back 1", then "released" in the details).
    let released = report.rolled_back.iter().filter(|transaction| report.released.contains(transaction)).count();
    let mut text = format!(
        "rolled forward {}, rolled back {}{}, cleaned {}, unresolved {}, conflicts {}{}\n",
        report.rolled_forward.len(),
        report.rolled_back.len() - released,
        if released > 0 { format!(", released {released}") } else { String::new() },
        report.cleaned.len(),
        report.unresolved.len(),
        report.conflicts.len(),
        if settled > 0 { format!(", settled {settled}") } else { String::new() }
    );
    let paths = |transaction: &vsh::TransactionId| match report.paths_of(*transaction) {
        Some(1) => " (1 path)".to_owned(),
        Some(count) => format!(" ({count} paths)"),
        None => String::new(),
    };
    for transaction in &report.rolled_forward {
        let _ = writeln!(text, "  rolled forward (committed): {transaction}{}", paths(transaction));
    }
    for transaction in &report.rolled_back {
        if report.released.contains(transaction) {
            // Killed before it applied anything: its work commits again (ux66 F4).
            let _ = writeln!(
                text,
                "  released: {transaction} (its commit was killed before it changed anything; the work is approved \
                 again: vsh commit {} commits it)",
                transaction.short()
            );
        } else {
            let _ =
                writeln!(text, "  rolled back (failed, before state restored): {transaction}{}", paths(transaction));
        }
    }
    for transaction in &report.settled_committed {
        let _ = writeln!(
            text,
            "  settled as committed: {transaction} (its log lost how it ended; the workspace holds every change it \
             makes)"
        );
    }
    for transaction in &report.settled_failed {
        let _ = writeln!(
            text,
            "  settled as failed: {transaction} (its log lost how it ended; the workspace holds none of its \
             changes, and it can never be committed now)"
        );
    }
    for (transaction, path) in &report.changed_since_commit {
        let _ = writeln!(
            text,
            "  changed by someone else after {} committed, left as is: {}",
            transaction.short(),
            shown(path.as_str(), false)
        );
    }
    for kept in &report.kept {
        let _ = writeln!(
            text,
            "  written by someone else while {} committed; the old node is kept at {} (was {})",
            kept.transaction.short(),
            kept.kept,
            shown(kept.path.as_str(), false)
        );
    }
    for unresolved in &report.unresolved {
        let state = unresolved.state.map_or("unknown", |state| state.name());
        let _ = writeln!(text, "  unresolved: {} ({state})", unresolved.transaction);
        for left in unresolved.paths.iter().take(max_paths) {
            let _ = writeln!(text, "    {}", shown(&left.to_string(), false));
        }
        if let Some(more) = unresolved.paths.len().checked_sub(max_paths).filter(|more| *more > 0) {
            let _ = writeln!(
                text,
                "    and {more} more path{} (vsh recover lists them all)",
                if more == 1 { "" } else { "s" }
            );
        }
        if unresolved.directory.is_none() {
            // No evidence: the record never heard how the commit ended.
            let _ = writeln!(
                text,
                "    the transaction log lost how this commit ended, and nothing of it is kept (a commit \
                 removes its directory only once it has finished): the workspace holds whichever state \
                 it reached; check it, then mark it failed with: vsh recover --keep {}",
                unresolved.transaction
            );
            continue;
        }
        let _ = writeln!(
            text,
            "    every other change of the commit was undone already; someone else changed these paths during \
             the commit; to put the before state back \
             (moving their nodes aside, never deleting them): vsh recover --restore {0}; to keep the workspace \
             as it is (what the commit moved aside is kept): vsh recover --keep {0}",
            unresolved.transaction
        );
    }
    for conflict in &report.conflicts {
        let _ = writeln!(text, "  conflict (blocks commits until resolved): {conflict}");
    }
    text
}

/// What a restore did, for people.
pub(crate) fn restore_text(report: &vsh::RestoreReport) -> String {
    let mut text = match report.transaction {
        Some(transaction) if report.kept && !report.nothing_kept => format!(
            "{transaction}  failed: the workspace is kept as it is, as the operator asked: nothing was put back, \
             and each path holds what the commit, and anyone writing meanwhile, left there\n"
        ),
        Some(transaction) if report.nothing_kept => format!(
            "{transaction}  marked failed; nothing was restored: none of it was kept (its log lost how its \
             commit ended), so the workspace is as the commit left it: check it by hand\n"
        ),
        Some(transaction) if report.changed_by_others.is_empty() && report.never_held.is_empty() => {
            format!("{transaction}  failed: before state restored\n")
        }
        Some(transaction) => format!("{transaction}  failed: before state restored but for the paths named below\n"),
        None => "nothing to restore\n".to_owned(),
    };
    for path in &report.restored {
        let _ = writeln!(text, "  restored {}", shown(path.as_str(), false));
    }
    for path in &report.left_as_found {
        let _ = writeln!(text, "  left as it is: {}", shown(path.as_str(), false));
    }
    for (path, aside) in &report.moved_aside {
        if report.kept {
            // Not the path's node: what the commit had taken from it (ux73 M4).
            let _ = writeln!(
                text,
                "  kept aside what the commit had taken from {} (its before state, or a racing writer's): {aside}",
                shown(path.as_str(), false)
            );
        } else {
            let _ = writeln!(text, "  moved aside {} -> {aside}", shown(path.as_str(), false));
        }
    }
    for path in &report.never_held {
        let _ = writeln!(
            text,
            "  not restored, left as is: {} (a writer racing the commit put another node in its way, which the \
             commit moved instead of the before node, and vsh never held that: the node moved aside above is \
             theirs; the path's before content is in vsh show)",
            shown(path.as_str(), false)
        );
    }
    for path in &report.changed_by_others {
        let _ =
            writeln!(text, "  changed by someone else after the rollback, left as is: {}", shown(path.as_str(), false));
    }
    text
}

#[cfg(test)]
mod tests {
    use vsh::lower::vsh_commit::{Conflict, ConflictReason};

    use super::*;

    /// ux83 L2: a commit killed before it changed anything was counted
    /// "rolled back" in the summary and "released" in the details, and an
    /// unresolved commit did not say it had put the rest back.
    #[test]
    fn a_recovery_summary_counts_released_commits_as_released() {
        let (released, undone) =
            (vsh::TransactionId::from_bytes([0xab; 32]), vsh::TransactionId::from_bytes([0xac; 32]));
        let report = vsh::RecoveryReport {
            rolled_back: vec![released, undone],
            released: vec![released],
            unresolved: vec![vsh::Unresolved {
                transaction: vsh::TransactionId::from_bytes([0xad; 32]),
                directory: Some(vsh::VPath::parse(".vsh/txn/ad").unwrap()),
                state: Some(vsh::TransactionState::RecoveryRequired),
                paths: Vec::new(),
            }],
            ..vsh::RecoveryReport::default()
        };
        let text = recovery_text(&report);
        assert!(
            text.starts_with("rolled forward 0, rolled back 1, released 1, cleaned 0, unresolved 1, conflicts 0\n"),
            "{text}"
        );
        assert!(
            text.contains(&format!("released: {released}"))
                && text.contains(&format!("before state restored): {undone}")),
            "{text}"
        );
        assert!(text.contains("every other change of the commit was undone already; someone else changed"), "{text}");
    }

    #[test]
    fn a_pending_row_is_labelled_by_a_line_that_says_something_and_its_intent_column_stays_in_line() {
        assert_eq!(
            first_line("import os\ntry:\n    vsh_write('a', 'b')\nexcept OSError:\n    pass"),
            "# vsh_write('a', 'b')"
        );
        assert_eq!(first_line("#!/bin/bash\nset -euo pipefail\nsed -i s/a/b/ f"), "# sed -i s/a/b/ f");
        assert_eq!(first_line("with open('f') as f:\n    pass"), "# with open('f') as f:");
        let row = |id: &[u8], policy_changed: bool, label: &str| {
            let record = vsh::TransactionRecord::new(
                vsh::TransactionId::digest(id),
                vsh::SnapshotId::digest(b"base"),
                vsh::TransactionState::PendingApproval,
                0,
            );
            let mut row = PendingRow::new(record, None, None);
            row.policy_changed = policy_changed;
            row.label = label.to_owned();
            row
        };
        let table = pending_table(&[row(b"a", false, "first"), row(b"b", true, "second")], 0);
        // Where each line's intent starts, its colour aside.
        let plain = |line: &str| {
            let mut out = String::new();
            let mut rest = line;
            while let Some((before, after)) = rest.split_once('\x1b') {
                out.push_str(before);
                rest = after.split_once('m').map_or("", |(_, tail)| tail);
            }
            out + rest
        };
        let columns: Vec<usize> = table.lines().map(|line| plain(line).rfind(' ').unwrap()).collect();
        assert_eq!(columns.len(), 3, "{table}");
        assert!(columns.iter().all(|column| *column == columns[0]), "{table}");
        assert!(plain(&table).contains("policy-changed  second"), "{table}");
    }

    #[test]
    fn counts_read_as_english_and_the_root_is_named_in_a_stale_list() {
        assert_eq!(counted(1, "path"), "1 path");
        assert_eq!(counted(0, "path"), "0 paths");
        assert_eq!(counted(3, "dependency"), "3 dependencies");
        assert_eq!(counted(1, "dependency"), "1 dependency");
        let root = [Conflict { path: vsh::VPath::root(), reason: ConflictReason::Listing }];
        assert!(
            stale_text(&root, 1, true)
                .contains("  (the workspace's root)  the names in it changed: a file was created")
        );
    }

    #[test]
    fn a_commit_whose_log_lost_its_outcome_is_never_said_to_be_restored_or_changed_by_someone_else() {
        let transaction = vsh::TransactionId::digest(b"lost");
        let lost = vsh::Unresolved {
            transaction,
            directory: None,
            state: Some(vsh::TransactionState::Committing),
            paths: Vec::new(),
        };
        let report = vsh::RecoveryReport { unresolved: vec![lost], ..vsh::RecoveryReport::default() };
        let text = recovery_text(&report);
        assert!(text.contains("the transaction log lost how this commit ended"), "{text}");
        assert!(!text.contains("someone else changed"), "{text}");
        let restored =
            vsh::RestoreReport { transaction: Some(transaction), nothing_kept: true, ..vsh::RestoreReport::default() };
        let text = restore_text(&restored);
        assert!(text.contains("marked failed; nothing was restored"), "{text}");
        assert!(!text.contains("before state restored"), "{text}");
        let restored = vsh::RestoreReport { transaction: Some(transaction), ..vsh::RestoreReport::default() };
        assert!(restore_text(&restored).contains("failed: before state restored"));
        // Every other command's first words list a few of its paths, and
        // say how many more `vsh recover` lists (sec50: hundreds of lines).
        let left = |index: u32| vsh::lower::vsh_commit::LeftPath {
            path: vsh::VPath::parse(&format!("f{index}.txt")).unwrap(),
            operation: index,
            action: "install",
            reason: vsh::lower::vsh_commit::LeftReason::Ambiguous,
            kept: None,
        };
        let many = vsh::Unresolved {
            transaction,
            directory: Some(vsh::VPath::parse("txn/x").unwrap()),
            state: Some(vsh::TransactionState::RecoveryRequired),
            paths: (0..300).map(left).collect(),
        };
        let report = vsh::RecoveryReport { unresolved: vec![many], ..vsh::RecoveryReport::default() };
        let short = recovery_text_within(&report, 5);
        assert!(short.contains("f4.txt") && !short.contains("f5.txt"), "{short}");
        assert!(short.contains("and 295 more paths (vsh recover lists them all)"), "{short}");
        assert!(recovery_text(&report).contains("f299.txt"));
    }

    #[test]
    fn a_name_or_a_line_cannot_start_a_line_move_the_cursor_or_reorder_the_text() {
        // Plain text is shown as it is, without copying.
        assert!(matches!(shown("src/main.rs", false), std::borrow::Cow::Borrowed("src/main.rs")));
        assert!(matches!(shown("\tlet a = b\\n;", true), std::borrow::Cow::Borrowed(_)));
        let cases = [
            ("ok.txt\n  create innocent.txt", false, "ok.txt\\n  create innocent.txt"),
            ("a\rb", false, "a\\rb"),
            ("a\tb", false, "a\\tb"),
            ("back\\slash", false, "back\\\\slash"),
            ("\u{1b}[2Jcleared", false, "\\x1b[2Jcleared"),
            ("del\u{7f}", false, "del\\x7f"),
            ("c1\u{85}", false, "c1\\u{85}"),
            ("abc\u{202e}txt.exe", false, "abc\\u{202e}txt.exe"),
            ("\u{2066}x\u{2069}", false, "\\u{2066}x\\u{2069}"),
            ("+zero\u{200b}width\u{feff}", true, "+zero\\u{200b}width\\u{feff}"),
            ("+line\u{2028}sep\u{61c}", true, "+line\\u{2028}sep\\u{61c}"),
            ("+evil\rgood", true, "+evil\\rgood"),
            ("+\tkept\\n", true, "+\tkept\\n"),
            // sec80 F5: a decomposed name beside its composed twin.
            ("e\u{301}.txt", false, "e\\u{301}.txt"),
            ("\u{e9}.txt", false, "\u{e9}.txt"),
            ("+e\u{301}", true, "+e\u{301}"),
        ];
        for (text, keep_tabs, expected) in cases {
            assert_eq!(shown(text, keep_tabs), expected, "{text:?}");
            assert!(!shown(text, keep_tabs).contains(['\n', '\r', '\u{1b}']), "{text:?}");
        }
    }

    #[test]
    fn candidates_and_conflicts_are_listed_with_the_count_beyond_the_list() {
        let ids = [vsh::TransactionId::from_bytes([0xab; 32]), vsh::TransactionId::from_bytes([0xac; 32])];
        let text = candidates_text(&ids, 5);
        assert!(text.contains(&format!("  {}\n  {}\n", ids[0], ids[1])), "{text}");
        assert!(text.contains("... and 3 more"), "{text}");
        assert!(!candidates_text(&ids, 2).contains("... and"));
        let conflicts = [Conflict { path: vsh::VPath::parse("a/b.txt").unwrap(), reason: ConflictReason::Content }];
        let text = stale_text(&conflicts, 3, true);
        assert!(text.contains("  a/b.txt  content changed since the run read it\n"), "{text}");
        assert!(text.contains("... and 2 more"), "{text}");
        // At most ten are listed, however many the commit names.
        let many: Vec<Conflict> = (0..128)
            .map(|n| Conflict { path: vsh::VPath::parse(&format!("f{n}")).unwrap(), reason: ConflictReason::Content })
            .collect();
        let text = stale_text(&many, 3051, false);
        assert_eq!(text.lines().filter(|line| line.contains("content changed")).count(), 10, "{text}");
        assert!(text.contains("... and 3041 more"), "{text}");
    }

    #[test]
    fn a_duration_keeps_each_number_apart_from_its_unit() {
        assert_eq!(spaced_duration(std::time::Duration::from_hours(24)), "1 day");
        assert_eq!(spaced_duration(std::time::Duration::from_mins(15)), "15 min");
        assert_eq!(spaced_duration(std::time::Duration::from_hours(49)), "2 days 1 h");
    }

    #[test]
    fn relative_times_read_as_a_person_says_them() {
        let now = 1_000_000_000;
        assert_eq!(relative(now + 14 * 60_000 + 5_000, now), "in 14 min");
        assert_eq!(relative(now - 3_000, now), "3 s ago");
        // Now, or less than a second ahead, is now: never "in 0 s".
        assert_eq!(relative(now, now), "0 s ago");
        assert_eq!(relative(now + 999, now), "0 s ago");
        assert_eq!(relative(now + 1_000, now), "in 1 s");
        assert_eq!(relative(now + 59_999, now), "in 59 s");
        assert_eq!(relative(now + 3_600_000 + 120_000, now), "in 1 h 2 min");
        assert_eq!(relative(now - 2 * 86_400_000 - 3_600_000, now), "2 d 1 h ago");
        assert!(local_time(1_700_000_000_000).starts_with("2023-11-1"), "{}", local_time(1_700_000_000_000));
    }
}
