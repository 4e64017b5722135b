//! [`RunRequest`]: one program to run, and how.

use vsh_monty::ExecutionBudget;

/// The program's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Language {
    /// Monty, a sandboxed Python subset.
    #[default]
    Monty,
    /// Bash, in a bounded virtual interpreter: only with host configuration
    /// for it; without, a run is [`crate::VshError::LanguageUnavailable`].
    Bash,
    /// A real command in a candidate workspace (the
    /// `vsh-command-confined-v1` profile): the program text is the command's
    /// argv as a JSON array of strings (`["cargo", "fmt"]`), or an object
    /// `{"argv": ["cargo", "test"], "cwd": "crates/app", "stdin": "text"}` to
    /// start it in a directory of the workspace or give it a standard input
    /// (each optional; the input is part of the program text, so the
    /// evidence binds it); only with
    /// [`crate::RuntimeConfig::with_commands`].
    Command,
    /// The steps of a [`crate::CandidateWorkspace`], promoted as one
    /// transaction: its program text is the session's transcript (a JSON
    /// array of its steps). Not a program [`crate::Runtime::run`] runs.
    Session,
}

impl Language {
    /// `monty`, `bash`, `command` or `session`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Monty => "monty",
            Self::Bash => "bash",
            Self::Command => "command",
            Self::Session => "session",
        }
    }

    /// The budget a request in this language gets unless it is given one:
    /// a real command's ([`ExecutionBudget::for_commands`]: minutes, not a
    /// second, and room for a build's reads and writes) or a program's
    /// ([`ExecutionBudget::default`]).
    pub fn default_budget(self) -> ExecutionBudget {
        match self {
            Self::Command => ExecutionBudget::for_commands(),
            Self::Monty | Self::Bash | Self::Session => ExecutionBudget::default(),
        }
    }
}

/// What happens after the policy decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunMode {
    /// Never change the workspace; keep the transaction for a later commit.
    #[default]
    Preview,
    /// Commit at once if, and only if, the policy auto-approves.
    Auto,
}

/// How much of the diff a receipt carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReceiptDetail {
    /// Identity and counts only.
    #[default]
    Compact,
    /// Every changed path with its before and after states, without the
    /// review's hunks (which read and compare contents).
    Changes,
    /// Every changed path with its before and after states, and the review:
    /// each changed text file's unified hunks (bounded by
    /// [`vsh_vfs::ReviewLimits`]).
    Full,
}

/// One program to run.
#[derive(Debug, Clone)]
pub struct RunRequest<'a> {
    /// The program's source.
    pub code: &'a str,
    /// Its language.
    pub language: Language,
    /// A free-text statement of what the program is for, bound into the transaction.
    pub intent: Option<&'a str>,
    /// Preview or auto-commit.
    pub mode: RunMode,
    /// Receipt detail.
    pub detail: ReceiptDetail,
    /// Execution budget.
    pub budget: ExecutionBudget,
    /// For a Bash program or a real command: whether a non-zero exit status
    /// is an outcome (recorded in the receipt and the evidence, decided and
    /// committable like any other) instead of a failed run, which stores
    /// nothing. Default `false`: a failing command commits nothing.
    pub accept_failure: bool,
    /// The transaction whose stored program this request runs again (`vsh
    /// rerun`), bound into the new transaction's evidence: what
    /// [`crate::Runtime::reruns_of`] follows.
    pub rerun_of: Option<vsh_types::TransactionId>,
    /// For a rerun: the runs of the same work committed when it was decided
    /// ([`crate::Runtime::work_done_so_far`]). In [`RunMode::Auto`] its
    /// commit is refused ([`crate::VshError::DoneMeanwhile`]) when another
    /// was committed since, checked under the commit lock.
    pub done_so_far: Option<crate::WorkDoneSoFar>,
    /// Whether real commands start with empty scratch directories (build
    /// outputs and caches): a build from nothing an earlier run left there.
    /// Runs with the same grants share them, and a run's commands may leave
    /// there what a later run executes (bytecode, a test binary newer than
    /// its sources). Default `false`: builds stay incremental.
    pub fresh_scratch: bool,
}

impl<'a> RunRequest<'a> {
    /// A compact Monty preview with default limits.
    pub fn new(code: &'a str) -> Self {
        Self {
            code,
            language: Language::Monty,
            intent: None,
            mode: RunMode::Preview,
            detail: ReceiptDetail::Compact,
            budget: ExecutionBudget::default(),
            accept_failure: false,
            rerun_of: None,
            done_so_far: None,
            fresh_scratch: false,
        }
    }

    /// Start real commands with empty scratch directories (see
    /// [`RunRequest::fresh_scratch`]).
    #[must_use]
    pub fn with_fresh_scratch(mut self) -> Self {
        self.fresh_scratch = true;
        self
    }

    /// Run transaction `of`'s stored program again, as its rerun (see
    /// [`RunRequest::rerun_of`]).
    #[must_use]
    pub fn with_rerun_of(mut self, of: vsh_types::TransactionId) -> Self {
        self.rerun_of = Some(of);
        self
    }

    /// Commit (in [`RunMode::Auto`]) only while no run of the same work but
    /// those in `so_far` is committed (see [`RunRequest::done_so_far`]).
    #[must_use]
    pub fn with_done_so_far(mut self, so_far: crate::WorkDoneSoFar) -> Self {
        self.done_so_far = Some(so_far);
        self
    }

    /// Accept a non-zero exit status of a Bash program or a real command as
    /// the run's outcome (see [`RunRequest::accept_failure`]): a failing test
    /// run can still be useful work to review.
    #[must_use]
    pub fn with_failure_accepted(mut self) -> Self {
        self.accept_failure = true;
        self
    }

    /// Replace the language. A budget equal to the old language's default
    /// becomes the new one's ([`Language::default_budget`]); any other budget
    /// set with [`RunRequest::with_budget`] is kept (set the budget after the
    /// language to keep a default one). A Monty program that calls
    /// `vsh_exec`, or Bash under [`crate::BashConfig::confined`], runs real
    /// programs under the budget it is given: give it
    /// [`ExecutionBudget::for_commands`] for a build or a test suite.
    #[must_use]
    pub fn with_language(mut self, language: Language) -> Self {
        if self.budget == self.language.default_budget() {
            self.budget = language.default_budget();
        }
        self.language = language;
        self
    }

    /// Replace the intent.
    #[must_use]
    pub fn with_intent(mut self, intent: &'a str) -> Self {
        self.intent = Some(intent);
        self
    }

    /// Replace the mode.
    #[must_use]
    pub fn with_mode(mut self, mode: RunMode) -> Self {
        self.mode = mode;
        self
    }

    /// Replace the receipt detail.
    #[must_use]
    pub fn with_detail(mut self, detail: ReceiptDetail) -> Self {
        self.detail = detail;
        self
    }

    /// Replace the budget.
    #[must_use]
    pub fn with_budget(mut self, budget: ExecutionBudget) -> Self {
        self.budget = budget;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::{Language, RunRequest};
    use crate::ExecutionBudget;

    #[test]
    fn a_command_gets_a_commands_budget_unless_it_is_given_one() {
        assert_eq!(RunRequest::new("1").budget, ExecutionBudget::default());
        let command = RunRequest::new("[\"true\"]").with_language(Language::Command);
        assert_eq!(command.budget, ExecutionBudget::for_commands());
        assert!(command.budget.max_duration > ExecutionBudget::default().max_duration);
        // Back to a program: a program's budget again.
        assert_eq!(command.with_language(Language::Bash).budget, ExecutionBudget::default());
        // A budget given is kept, in either order.
        let given = ExecutionBudget { max_os_calls: 7, ..ExecutionBudget::default() };
        let request = RunRequest::new("[\"true\"]").with_budget(given.clone()).with_language(Language::Command);
        assert_eq!(request.budget, given);
        let request = RunRequest::new("[\"true\"]").with_language(Language::Command).with_budget(given.clone());
        assert_eq!(request.budget, given);
    }
}
