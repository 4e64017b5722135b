//! [`Pattern`]: the glob language of protected-path rules.
//!
//! A pattern is a `/`-separated list of components, anchored at the workspace
//! root (there is no implicit "any depth"; write `**/name` for that). Within a
//! component:
//!
//! | syntax | matches |
//! |---|---|
//! | `*` | any run of characters, possibly empty (never `/`) |
//! | `?` | exactly one character (a Unicode scalar value, never `/`) |
//! | `[abc]`, `[a-z]` | one character from the class |
//! | `[!a-z]`, `[^a-z]` | one character not in the class |
//! | anything else | itself, exactly (or case-insensitively, see below) |
//!
//! A component that is exactly `**` matches zero or more whole components, so
//! `a/**` matches `a` itself and everything beneath it, and `**/x` matches `x` at
//! any depth. There are no escapes: a backslash is an ordinary file-name
//! character. A literal `[`, `*` or `?` is written as a one-character class:
//! `[[]`, `[*]`, `[?]`. Inside a class, `-` is literal when first or last, and
//! `]` cannot be a member (outside a class `]` is an ordinary character).
//!
//! Rejected: the empty pattern, absolute patterns, NUL, empty components
//! (`a//b`, a trailing `/`), `.` and `..` components, `**` mixed with other
//! text in one component (`a**`, `***`), unclosed or empty classes, reversed
//! ranges (`[z-a]`), and patterns longer than [`MAX_PATTERN_BYTES`].
//!
//! # Case
//!
//! [`Pattern::parse`] compiles a case-sensitive pattern;
//! [`Pattern::case_insensitive`] turns it into one that compares letters
//! without regard to case, as a case-insensitive filesystem (vfat, exfat,
//! cifs, ext4 casefold directories) resolves names: `**/.env/**` then also
//! protects `.ENV` and `config/.Env`. Letters are compared by their Unicode
//! lower-case mapping, with the full case folds of `ß`, `ẞ`, `ſ`, `ς` and the
//! iota forms added, so `STRASSE` matches `straße`. Protected-path rules use
//! case-insensitive patterns unless a policy file asks otherwise.
//!
//! Matching never recurses: components are matched with the classic two-cursor
//! algorithm that backtracks only to the most recent `*`, and `**` is handled the
//! same way one level up, over components. The cost is bounded by
//! O(pattern length × path length) whatever the input.
//!
//! # Walks
//!
//! A tree walk matches one component at a time: [`Pattern::start`] gives the
//! state before the first component, [`Pattern::step`] consumes one name,
//! [`Pattern::is_match`] says whether the names so far are a match and
//! [`Pattern::can_continue`] whether any longer path still could be (so a walk
//! prunes every directory below which nothing can match). Stepping through a
//! path's components answers exactly what [`Pattern::matches`] answers for it.
//! This is the one glob engine: protected-path rules and the guest's
//! `vsh_glob` both use it, so the same text means the same paths in both.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use vsh_types::VPath;

/// The longest pattern text [`Pattern::parse`] accepts, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4096;

/// Why a string is not a valid [`Pattern`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PatternError {
    /// The pattern was empty.
    #[error("pattern is empty")]
    Empty,
    /// The pattern was longer than [`MAX_PATTERN_BYTES`].
    #[error("pattern is {length} bytes long, more than the limit of {limit}")]
    TooLong {
        /// The pattern's length in bytes.
        length: usize,
        /// The limit.
        limit: usize,
    },
    /// The pattern contained a NUL character.
    #[error("pattern contains a NUL character")]
    Nul,
    /// The pattern started with `/`.
    #[error("pattern {pattern:?} is absolute; patterns are relative to the workspace root")]
    Absolute {
        /// The rejected pattern.
        pattern: String,
    },
    /// The pattern had an empty component (`a//b`, or a trailing `/`).
    #[error("pattern {pattern:?} has an empty component{}", directory_hint(pattern))]
    EmptyComponent {
        /// The rejected pattern.
        pattern: String,
    },
    /// The pattern had a `.` or `..` component.
    #[error("pattern {pattern:?} has a {component:?} component")]
    DotComponent {
        /// The rejected pattern.
        pattern: String,
        /// The offending component.
        component: String,
    },
    /// `**` appeared inside a component with other text.
    #[error("pattern {pattern:?}: `**` must be a whole component, found {component:?}")]
    MixedDoubleStar {
        /// The rejected pattern.
        pattern: String,
        /// The offending component.
        component: String,
    },
    /// A `[` had no closing `]` within its component.
    #[error("pattern {pattern:?} has an unclosed character class")]
    UnclosedClass {
        /// The rejected pattern.
        pattern: String,
    },
    /// A class had no members (`[]`, `[!]`).
    #[error("pattern {pattern:?} has an empty character class")]
    EmptyClass {
        /// The rejected pattern.
        pattern: String,
    },
    /// A range's start came after its end (`[z-a]`).
    #[error("pattern {pattern:?} has a reversed range {start:?}-{end:?}")]
    ReversedRange {
        /// The rejected pattern.
        pattern: String,
        /// The range's start.
        start: char,
        /// The range's end.
        end: char,
    },
}

/// For a pattern that names a directory with a trailing `/` (ux80 L6): the
/// pattern that means the directory and all it holds.
fn directory_hint(pattern: &str) -> String {
    match pattern.strip_suffix('/') {
        Some(directory) if !directory.is_empty() && !directory.split('/').any(str::is_empty) => {
            format!(" (a directory and all it holds is `{directory}/**`)")
        }
        _ => String::new(),
    }
}

/// A compiled glob over workspace paths; see the [module documentation](self).
///
/// Equality, ordering and hashing are those of the pattern text.
#[derive(Clone)]
pub struct Pattern {
    text: String,
    segments: Vec<Segment>,
    /// The whole path this pattern matches, when it has no wildcard at all
    /// (folded when the pattern is case-insensitive).
    literal: Option<String>,
    /// Whether letters compare without regard to case (segments are folded).
    case_insensitive: bool,
    /// A segment before the last that is literal text or a prefix, if any:
    /// a matching path has a component it matches, which a few string
    /// comparisons tell before the whole match is tried (a protected-path
    /// rule such as `**/.env/**` is tried against every entry of a walk).
    needle: Option<usize>,
}

/// One pattern component.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// `**`: zero or more components.
    AnyDepth,
    /// A component without wildcards, compared as a string.
    Literal(String),
    /// `*` then literal text: the component ends with the text.
    Suffix(String),
    /// Literal text then `*`: the component starts with the text.
    Prefix(String),
    /// Any other component with at least one wildcard.
    Glob(Vec<Token>),
}

/// One element of a globbed component.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Char(char),
    AnyChar,
    Star,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// A class of a case-insensitive pattern: a (folded) character is a member
    /// if it, or its upper-case form, is in a range.
    FoldedClass {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Pattern {
    /// Parse and compile a pattern.
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        if text.is_empty() {
            return Err(PatternError::Empty);
        }
        if text.len() > MAX_PATTERN_BYTES {
            return Err(PatternError::TooLong { length: text.len(), limit: MAX_PATTERN_BYTES });
        }
        if text.contains('\0') {
            return Err(PatternError::Nul);
        }
        if text.starts_with('/') {
            return Err(PatternError::Absolute { pattern: text.to_owned() });
        }
        let mut segments = Vec::new();
        for component in text.split('/') {
            let segment = parse_component(text, component)?;
            // `**/**` matches exactly what `**` matches: keep one.
            if segment == Segment::AnyDepth && segments.last() == Some(&Segment::AnyDepth) {
                continue;
            }
            segments.push(segment);
        }
        Ok(Self::from_segments(text.to_owned(), segments))
    }

    /// The pattern matching exactly `path`, or `None` for the root (which no
    /// pattern names alone).
    ///
    /// Wildcard characters in the path are escaped, so they match only themselves.
    pub fn exact(path: &VPath) -> Option<Pattern> {
        if path.is_root() {
            return None;
        }
        let segments = path.components().map(|name| Segment::Literal(name.to_owned())).collect();
        Some(Self::from_segments(Self::escape(path.as_str()), segments))
    }

    /// The pattern matching `path` and everything beneath it (`path/**`).
    ///
    /// Wildcard characters in the path are escaped. For the root this is `**`,
    /// which matches every path.
    pub fn subtree(path: &VPath) -> Pattern {
        let mut segments: Vec<Segment> = path.components().map(|name| Segment::Literal(name.to_owned())).collect();
        segments.push(Segment::AnyDepth);
        let text = if path.is_root() { "**".to_owned() } else { format!("{}/**", Self::escape(path.as_str())) };
        Self::from_segments(text, segments)
    }

    /// Escape `*`, `?` and `[` so that the result, as a pattern component or
    /// path, matches only `text` itself.
    pub fn escape(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for ch in text.chars() {
            match ch {
                '*' | '?' | '[' => {
                    out.push('[');
                    out.push(ch);
                    out.push(']');
                }
                other => out.push(other),
            }
        }
        out
    }

    fn from_segments(text: String, segments: Vec<Segment>) -> Pattern {
        let mut literal = Some(String::new());
        for segment in &segments {
            match (segment, literal.as_mut()) {
                (Segment::Literal(name), Some(joined)) => {
                    if !joined.is_empty() {
                        joined.push('/');
                    }
                    joined.push_str(name);
                }
                _ => literal = None,
            }
        }
        let before_last = segments.len().saturating_sub(1);
        let literal_at = |wanted: fn(&Segment) -> bool| segments[..before_last].iter().position(wanted);
        let needle = literal_at(|segment| matches!(segment, Segment::Literal(_)))
            .or_else(|| literal_at(|segment| matches!(segment, Segment::Prefix(_))));
        Self { text, segments, literal, case_insensitive: false, needle }
    }

    /// This pattern, comparing letters without regard to case (see the
    /// module docs).
    #[must_use]
    pub fn case_insensitive(self) -> Pattern {
        if self.case_insensitive {
            return self;
        }
        let segments = self.segments.into_iter().map(Segment::folded).collect();
        let mut pattern = Self::from_segments(self.text, segments);
        pattern.case_insensitive = true;
        pattern
    }

    /// Whether letters compare without regard to case.
    pub fn is_case_insensitive(&self) -> bool {
        self.case_insensitive
    }

    /// The pattern text, as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Text that one component of every path this pattern matches is (its
    /// first component without wildcards; folded when the pattern is
    /// case-insensitive), if it has one: an index of rules by it
    /// (`CallPolicy`) tries a rule only on paths that have the component.
    pub(crate) fn required_component(&self) -> Option<&str> {
        self.segments.iter().find_map(|segment| match segment {
            Segment::Literal(text) => Some(text.as_str()),
            _ => None,
        })
    }

    /// Whether the pattern has no wildcard (it matches exactly one path).
    pub fn is_literal(&self) -> bool {
        self.literal.is_some()
    }

    /// Whether `path` matches the pattern.
    pub fn matches(&self, path: &VPath) -> bool {
        let components: Vec<&str> = path.components().collect();
        if self.case_insensitive {
            let folded: Vec<std::borrow::Cow<'_, str>> = components.iter().map(|name| fold(name)).collect();
            return self.matches_split(&fold(path.as_str()), &folded);
        }
        self.matches_split(path.as_str(), &components)
    }

    /// [`Pattern::matches`] with the path already split into its components
    /// (folded with [`fold`] for a case-insensitive pattern, as `path` is).
    pub(crate) fn matches_split<S: AsRef<str>>(&self, path: &str, components: &[S]) -> bool {
        if let Some(literal) = &self.literal {
            return path == literal;
        }
        // Cheap necessary condition: a last segment that is not `**` must match
        // the last component.
        match self.segments.last() {
            Some(Segment::AnyDepth) | None => {}
            Some(last) => match components.last() {
                Some(name) if last.matches(name.as_ref()) => {}
                _ => return false,
            },
        }
        if let Some(needle) = self.needle.and_then(|index| self.segments.get(index))
            && !components.iter().any(|name| needle.matches(name.as_ref()))
        {
            return false;
        }
        match_segments(&self.segments, components)
    }
}

/// Where an incremental match stands after some leading components of a path:
/// the pattern positions still alive. Built by [`Pattern::start`] and
/// [`Pattern::step`]; at most one position per pattern component, plus the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchState {
    positions: Positions,
}

/// A set of pattern positions: a bit each. Inline (no allocation) for a
/// pattern of fewer than 128 components, which is every glob a person
/// writes: a walk steps the state once per entry it visits, and a vector
/// there was two allocations per entry, about a tenth of a 10,000-entry
/// glob's time. A longer pattern (one made from a deep path) keeps its bits
/// in words on the heap.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Positions {
    Inline(u128),
    Heap(Vec<u64>),
}

impl Positions {
    /// No position, for a pattern of `segments` components (positions
    /// `0..=segments`).
    fn empty(segments: usize) -> Self {
        if segments < 128 { Self::Inline(0) } else { Self::Heap(vec![0; segments / 64 + 1]) }
    }

    fn insert(&mut self, position: usize) {
        match self {
            Self::Inline(bits) => *bits |= 1 << position,
            Self::Heap(words) => words[position / 64] |= 1 << (position % 64),
        }
    }

    fn contains(&self, position: usize) -> bool {
        match self {
            Self::Inline(bits) => position < 128 && bits & (1 << position) != 0,
            Self::Heap(words) => words.get(position / 64).is_some_and(|word| word & (1 << (position % 64)) != 0),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Self::Inline(bits) => *bits == 0,
            Self::Heap(words) => words.iter().all(|word| *word == 0),
        }
    }

    /// The smallest position.
    fn first(&self) -> Option<usize> {
        match self {
            Self::Inline(0) => None,
            Self::Inline(bits) => Some(bits.trailing_zeros() as usize),
            Self::Heap(words) => words
                .iter()
                .enumerate()
                .find(|(_, word)| **word != 0)
                .map(|(index, word)| index * 64 + word.trailing_zeros() as usize),
        }
    }

    /// The largest position.
    fn last(&self) -> Option<usize> {
        match self {
            Self::Inline(0) => None,
            Self::Inline(bits) => Some(127 - bits.leading_zeros() as usize),
            Self::Heap(words) => words
                .iter()
                .enumerate()
                .rev()
                .find(|(_, word)| **word != 0)
                .map(|(index, word)| index * 64 + 63 - word.leading_zeros() as usize),
        }
    }

    /// Call `f` with each position, in increasing order.
    fn for_each(&self, mut f: impl FnMut(usize)) {
        let mut word_bits = |base: usize, mut bits: u128| {
            while bits != 0 {
                f(base + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        };
        match self {
            Self::Inline(bits) => word_bits(0, *bits),
            Self::Heap(words) => {
                for (index, word) in words.iter().enumerate() {
                    word_bits(index * 64, u128::from(*word));
                }
            }
        }
    }
}

impl MatchState {
    /// Whether no path with these leading components can match (nothing is alive).
    pub fn is_dead(&self) -> bool {
        self.positions.is_empty()
    }
}

impl Pattern {
    /// The state before any component is consumed.
    pub fn start(&self) -> MatchState {
        let mut positions = Positions::empty(self.segments.len());
        positions.insert(0);
        self.close(positions)
    }

    /// The state after also consuming the component `name` (folded first when
    /// the pattern is case-insensitive).
    pub fn step(&self, state: &MatchState, name: &str) -> MatchState {
        let folded;
        let name = if self.case_insensitive {
            folded = fold(name);
            folded.as_ref()
        } else {
            name
        };
        let mut next = Positions::empty(self.segments.len());
        state.positions.for_each(|position| match self.segments.get(position) {
            // `**` consumes the name and stays.
            Some(Segment::AnyDepth) => next.insert(position),
            Some(segment) if segment.matches(name) => next.insert(position + 1),
            _ => {}
        });
        self.close(next)
    }

    /// Whether the components consumed so far are a match.
    pub fn is_match(&self, state: &MatchState) -> bool {
        state.positions.last() == Some(self.segments.len())
    }

    /// Whether a path longer than the components consumed so far could match.
    pub fn can_continue(&self, state: &MatchState) -> bool {
        state.positions.first().is_some_and(|first| first < self.segments.len())
    }

    /// `positions` with the position after every `**` added (it may match
    /// nothing): one pass in increasing order reaches the end of a run of
    /// `**`s, since each adds a larger position.
    fn close(&self, mut positions: Positions) -> MatchState {
        for (position, segment) in self.segments.iter().enumerate() {
            if *segment == Segment::AnyDepth && positions.contains(position) {
                positions.insert(position + 1);
            }
        }
        MatchState { positions }
    }
}

fn parse_component(pattern: &str, component: &str) -> Result<Segment, PatternError> {
    match component {
        "" => return Err(PatternError::EmptyComponent { pattern: pattern.to_owned() }),
        "." | ".." => {
            return Err(PatternError::DotComponent { pattern: pattern.to_owned(), component: component.to_owned() });
        }
        "**" => return Ok(Segment::AnyDepth),
        _ => {}
    }
    let mut tokens = Vec::new();
    let mut chars = component.chars();
    while let Some(ch) = chars.next() {
        let token = match ch {
            '*' => {
                if tokens.last() == Some(&Token::Star) {
                    return Err(PatternError::MixedDoubleStar {
                        pattern: pattern.to_owned(),
                        component: component.to_owned(),
                    });
                }
                Token::Star
            }
            '?' => Token::AnyChar,
            '[' => match parse_class(pattern, &mut chars)? {
                // `[*]` and friends are plain characters: keep such components literal.
                Token::Class { negated: false, ranges } if ranges.len() == 1 && ranges[0].0 == ranges[0].1 => {
                    Token::Char(ranges[0].0)
                }
                class => class,
            },
            other => Token::Char(other),
        };
        tokens.push(token);
    }
    // Specialize the common shapes (`name`, `*.ext`, `name.*`) to string comparisons.
    let literal = |tokens: &[Token]| -> Option<String> {
        tokens.iter().map(|token| if let Token::Char(ch) = token { Some(*ch) } else { None }).collect()
    };
    if let Some(text) = literal(&tokens) {
        return Ok(Segment::Literal(text));
    }
    if let Some((Token::Star, rest)) = tokens.split_first()
        && let Some(text) = literal(rest)
    {
        return Ok(Segment::Suffix(text));
    }
    if let Some((Token::Star, rest)) = tokens.split_last()
        && let Some(text) = literal(rest)
    {
        return Ok(Segment::Prefix(text));
    }
    Ok(Segment::Glob(tokens))
}

/// Parse a class body after its `[`, consuming the closing `]`.
fn parse_class(pattern: &str, chars: &mut std::str::Chars<'_>) -> Result<Token, PatternError> {
    let unclosed = || PatternError::UnclosedClass { pattern: pattern.to_owned() };
    let mut members: Vec<char> = Vec::new();
    let mut negated = false;
    let mut first = true;
    loop {
        let ch = chars.next().ok_or_else(unclosed)?;
        if first && (ch == '!' || ch == '^') {
            negated = true;
            first = false;
            continue;
        }
        first = false;
        if ch == ']' {
            break;
        }
        members.push(ch);
    }
    if members.is_empty() {
        return Err(PatternError::EmptyClass { pattern: pattern.to_owned() });
    }
    let mut ranges = Vec::new();
    let mut index = 0;
    while index < members.len() {
        let start = members[index];
        // `-` between two members is a range; first or last it is literal.
        if index + 2 < members.len() && members[index + 1] == '-' {
            let end = members[index + 2];
            if start > end {
                return Err(PatternError::ReversedRange { pattern: pattern.to_owned(), start, end });
            }
            ranges.push((start, end));
            index += 3;
        } else {
            ranges.push((start, start));
            index += 1;
        }
    }
    Ok(Token::Class { negated, ranges })
}

/// A name as a case-insensitive pattern compares it: every letter replaced by
/// its case fold (see the module docs). Borrowed when nothing changes.
pub fn fold(text: &str) -> std::borrow::Cow<'_, str> {
    if text.bytes().all(|byte| byte.is_ascii() && !byte.is_ascii_uppercase()) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        push_folded(&mut out, ch);
    }
    std::borrow::Cow::Owned(out)
}

/// Append the case fold of `ch`.
fn push_folded(out: &mut String, ch: char) {
    match ch {
        'A'..='Z' => out.push(ch.to_ascii_lowercase()),
        _ if ch.is_ascii() => out.push(ch),
        // Full case folds that the lower-case mapping does not give.
        'ß' | 'ẞ' => out.push_str("ss"),
        'ſ' => out.push('s'),
        'ς' => out.push('σ'),
        '\u{345}' | '\u{1fbe}' => out.push('ι'),
        _ => out.extend(ch.to_lowercase()),
    }
}

impl Segment {
    /// The segment with its literal letters folded.
    fn folded(self) -> Segment {
        let fold_owned = |text: String| fold(&text).into_owned();
        match self {
            Segment::AnyDepth => Segment::AnyDepth,
            Segment::Literal(text) => Segment::Literal(fold_owned(text)),
            Segment::Suffix(text) => Segment::Suffix(fold_owned(text)),
            Segment::Prefix(text) => Segment::Prefix(fold_owned(text)),
            Segment::Glob(tokens) => Segment::Glob(
                tokens
                    .into_iter()
                    .flat_map(|token| match token {
                        Token::Char(ch) => {
                            let mut folded = String::new();
                            push_folded(&mut folded, ch);
                            folded.chars().map(Token::Char).collect::<Vec<_>>()
                        }
                        Token::Class { negated, ranges } => vec![Token::FoldedClass { negated, ranges }],
                        other => vec![other],
                    })
                    .collect(),
            ),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Segment::AnyDepth => true,
            Segment::Literal(literal) => literal == name,
            Segment::Suffix(suffix) => name.ends_with(suffix.as_str()),
            Segment::Prefix(prefix) => name.starts_with(prefix.as_str()),
            Segment::Glob(tokens) => match_tokens(tokens, name),
        }
    }
}

impl Token {
    fn matches(&self, ch: char) -> bool {
        match self {
            Token::Char(expected) => *expected == ch,
            Token::AnyChar => true,
            Token::Star => false,
            Token::Class { negated, ranges } => {
                ranges.iter().any(|(start, end)| *start <= ch && ch <= *end) != *negated
            }
            Token::FoldedClass { negated, ranges } => {
                let within = |ch: char| ranges.iter().any(|(start, end)| *start <= ch && ch <= *end);
                let mut upper = ch.to_uppercase();
                let member = within(ch) || (upper.len() == 1 && upper.next().is_some_and(within));
                member != *negated
            }
        }
    }
}

/// Match one component: two cursors, backtracking only to the latest `*`.
fn match_tokens(tokens: &[Token], text: &str) -> bool {
    let mut token = 0;
    let mut pos = 0;
    // (token index after the latest `*`, text offset that `*` will next stop absorbing at)
    let mut resume: Option<(usize, usize)> = None;
    while let Some(ch) = text[pos..].chars().next() {
        match tokens.get(token) {
            Some(Token::Star) => {
                resume = Some((token + 1, pos));
                token += 1;
                continue;
            }
            Some(expected) if expected.matches(ch) => {
                token += 1;
                pos += ch.len_utf8();
                continue;
            }
            _ => {}
        }
        let Some((after_star, from)) = resume else { return false };
        // Let the star absorb one more character and retry the rest from there.
        let absorbed = text[from..].chars().next().map_or(1, char::len_utf8);
        let next = from + absorbed;
        resume = Some((after_star, next));
        token = after_star;
        pos = next;
    }
    tokens[token..].iter().all(|rest| *rest == Token::Star)
}

/// Match the component list: the same algorithm, with `**` as the star.
fn match_segments<S: AsRef<str>>(segments: &[Segment], components: &[S]) -> bool {
    let mut segment = 0;
    let mut index = 0;
    let mut resume: Option<(usize, usize)> = None;
    while index < components.len() {
        match segments.get(segment) {
            Some(Segment::AnyDepth) => {
                resume = Some((segment + 1, index));
                segment += 1;
                continue;
            }
            Some(expected) if expected.matches(components[index].as_ref()) => {
                segment += 1;
                index += 1;
                continue;
            }
            _ => {}
        }
        let Some((after_any, from)) = resume else { return false };
        resume = Some((after_any, from + 1));
        segment = after_any;
        index = from + 1;
    }
    segments[segment..].iter().all(|rest| *rest == Segment::AnyDepth)
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pattern({:?})", self.text)
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text && self.case_insensitive == other.case_insensitive
    }
}

impl Eq for Pattern {}

impl Hash for Pattern {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state);
        self.case_insensitive.hash(state);
    }
}

impl PartialOrd for Pattern {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pattern {
    fn cmp(&self, other: &Self) -> Ordering {
        self.text.cmp(&other.text).then(self.case_insensitive.cmp(&other.case_insensitive))
    }
}

impl std::str::FromStr for Pattern {
    type Err = PatternError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl serde::Serialize for Pattern {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Pattern {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Pattern::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn pat(text: &str) -> Pattern {
        Pattern::parse(text).unwrap_or_else(|error| panic!("{text:?}: {error}"))
    }

    fn hits(pattern: &str, path: &str) -> bool {
        let path = if path.is_empty() { VPath::root() } else { VPath::parse(path).unwrap() };
        pat(pattern).matches(&path)
    }

    #[test]
    fn rejects_invalid_patterns() {
        let p = |text: &str| text.to_owned();
        assert_eq!(Pattern::parse(""), Err(PatternError::Empty));
        assert_eq!(Pattern::parse("a\0b"), Err(PatternError::Nul));
        assert_eq!(Pattern::parse("/etc"), Err(PatternError::Absolute { pattern: p("/etc") }));
        assert_eq!(Pattern::parse("a//b"), Err(PatternError::EmptyComponent { pattern: p("a//b") }));
        assert_eq!(Pattern::parse("a/"), Err(PatternError::EmptyComponent { pattern: p("a/") }));
        // A trailing `/` is taken for a directory: the message names the pattern for one (ux80 L6).
        let trailing = Pattern::parse("migrations/").unwrap_err().to_string();
        assert!(trailing.ends_with("empty component (a directory and all it holds is `migrations/**`)"), "{trailing}");
        assert!(!Pattern::parse("a//b/").unwrap_err().to_string().contains("all it holds"));
        assert_eq!(
            Pattern::parse("a/../b"),
            Err(PatternError::DotComponent { pattern: p("a/../b"), component: p("..") })
        );
        assert_eq!(Pattern::parse("./a"), Err(PatternError::DotComponent { pattern: p("./a"), component: p(".") }));
        for mixed in ["a**", "**b", "***", "a/x**y/b"] {
            assert!(matches!(Pattern::parse(mixed), Err(PatternError::MixedDoubleStar { .. })), "{mixed}");
        }
        for unclosed in ["[", "[a", "[!", "a[b/c]", "[a-"] {
            assert!(matches!(Pattern::parse(unclosed), Err(PatternError::UnclosedClass { .. })), "{unclosed}");
        }
        for empty in ["[]", "[!]", "[^]", "x[]y"] {
            assert!(matches!(Pattern::parse(empty), Err(PatternError::EmptyClass { .. })), "{empty}");
        }
        assert_eq!(
            Pattern::parse("[z-a]"),
            Err(PatternError::ReversedRange { pattern: p("[z-a]"), start: 'z', end: 'a' })
        );
        let long = "a".repeat(MAX_PATTERN_BYTES + 1);
        assert_eq!(Pattern::parse(&long), Err(PatternError::TooLong { length: long.len(), limit: MAX_PATTERN_BYTES }));
        assert!(Pattern::parse(&long[1..]).is_ok());
        // Error messages are lower-case and name the pattern.
        let message = Pattern::parse("[z-a]").unwrap_err().to_string();
        assert!(message.starts_with("pattern \"[z-a]\""), "{message}");
    }

    #[test]
    fn case_insensitive_patterns_ignore_case_the_way_case_insensitive_filesystems_do() {
        let insensitive =
            |pattern: &str, path: &str| pat(pattern).case_insensitive().matches(&VPath::parse(path).unwrap());
        for path in [".env", ".ENV", "a/.Env/x", "A/.eNv"] {
            assert!(insensitive("**/.env/**", path), "{path}");
        }
        assert!(!hits("**/.env/**", ".ENV"), "parse alone is case-sensitive");
        assert!(insensitive("**/*.pem", "keys/SERVER.PEM"));
        assert!(insensitive("**/id_rsa", "home/ID_RSA"));
        assert!(insensitive("**/secrets/**", "SECRETS/db"));
        assert!(!insensitive("**/secrets/**", "secret/db"));
        // Full folds: ß and ſ, and the Kelvin sign's lower case.
        assert!(insensitive("strasse", "STRAßE"));
        assert!(insensitive("straße", "STRASSE"));
        assert!(insensitive("*.sh", "run.ſh"));
        assert!(insensitive("[a-c]*", "Bee"));
        assert!(insensitive("[!a-c]*", "Dee"));
        assert!(!insensitive("[!a-c]*", "Bee"));
        assert!(insensitive("?ey", "KEY"));
        assert!(insensitive("k*", "\u{212a}elvin"));
        // Equality, ordering and hashing tell the two apart.
        assert_ne!(pat("a"), pat("a").case_insensitive());
        assert!(pat("a").case_insensitive().is_case_insensitive());
        assert_eq!(pat("a").case_insensitive().as_str(), "a");
    }

    #[test]
    fn wildcards_stay_within_one_component() {
        assert!(hits("*.pem", "server.pem"));
        assert!(hits("*.pem", ".pem"));
        assert!(!hits("*.pem", "a/server.pem"));
        assert!(hits("a/*/c", "a/b/c"));
        assert!(!hits("a/*/c", "a/b/x/c"));
        assert!(!hits("a/*", "a"));
        assert!(hits("?", "é"));
        assert!(!hits("?", "ab"));
        assert!(hits("a?c", "abc"));
        assert!(!hits("a?c", "a/c"));
        assert!(hits("x*y*z", "xAAyBBz"));
        assert!(!hits("x*y*z", "xAAzBBy"));
        assert!(hits("*", "anything"));
        assert!(!hits("*", ""), "the root has no component for `*`");
    }

    #[test]
    fn classes_and_escapes() {
        assert!(hits("[abc]", "b"));
        assert!(!hits("[abc]", "d"));
        assert!(hits("[a-c]x", "cx"));
        assert!(!hits("[a-c]x", "dx"));
        assert!(hits("[!a-c]", "d"));
        assert!(hits("[^a-c]", "d"));
        assert!(!hits("[!a-c]", "a"));
        assert!(hits("[-a]", "-") && hits("[a-]", "-") && !hits("[a-]", "b"));
        assert!(hits("[[]x", "[x"));
        assert!(hits("[*].key", "*.key"));
        assert!(!hits("[*].key", "a.key"));
        assert!(hits("[?]", "?") && !hits("[?]", "a"));
        assert!(hits("a]b", "a]b"));
        assert!(hits("a\\b", "a\\b"), "backslash is an ordinary character");
        assert!(hits("!x", "!x"));
        assert!(pat("[*].key").is_literal());
        assert!(!pat("*.key").is_literal());
    }

    #[test]
    fn double_star_spans_components() {
        assert!(hits("**/x", "x"));
        assert!(hits("**/x", "a/b/x"));
        assert!(!hits("**/x", "a/xb"));
        assert!(hits("a/**", "a"));
        assert!(hits("a/**", "a/b/c"));
        assert!(!hits("a/**", "ab"));
        assert!(hits("a/**/b", "a/b"));
        assert!(hits("a/**/b", "a/x/y/b"));
        assert!(!hits("a/**/b", "a/x/y/c"));
        assert!(hits("**", ""));
        assert!(hits("**", "a/b"));
        assert!(hits("**/**/x", "q/x"));
        assert!(hits("**/.env.*/**", "config/.env.local/inner"));
        assert_eq!(pat("**/**/**/x").segments, pat("**/x").segments);
    }

    #[test]
    fn exact_and_subtree_escape_wildcards() {
        let odd = VPath::parse("data[1]/*/x?").unwrap();
        let exact = Pattern::exact(&odd).unwrap();
        assert_eq!(exact.as_str(), "data[[]1]/[*]/x[?]");
        assert_eq!(Pattern::parse(exact.as_str()).unwrap().segments, exact.segments);
        assert!(exact.matches(&odd));
        assert!(!exact.matches(&VPath::parse("data1/a/xy").unwrap()));
        let subtree = Pattern::subtree(&odd);
        assert_eq!(subtree.as_str(), "data[[]1]/[*]/x[?]/**");
        assert_eq!(Pattern::parse(subtree.as_str()).unwrap().segments, subtree.segments);
        assert!(subtree.matches(&odd));
        assert!(subtree.matches(&odd.child("deep").unwrap()));
        assert!(!subtree.matches(&odd.parent().unwrap()));
        let everything = Pattern::subtree(&VPath::root());
        assert_eq!(everything.as_str(), "**");
        assert!(everything.matches(&VPath::root()) && everything.matches(&odd));
        assert_eq!(Pattern::exact(&VPath::root()), None);
    }

    #[test]
    fn adversarial_inputs_stay_linear() {
        // A naive backtracking matcher needs exponential time for these.
        let stars = pat(&format!("{}b", "*a".repeat(12)));
        let long_name = VPath::parse(&"a".repeat(2000)).unwrap();
        assert!(!stars.matches(&long_name));
        let depth = pat(&format!("{}b", "**/a/".repeat(12)));
        let deep = VPath::parse(&vec!["a"; 2000].join("/")).unwrap();
        assert!(!depth.matches(&deep));
        let deep_hit = VPath::parse(&format!("{}/b", vec!["a"; 2000].join("/"))).unwrap();
        assert!(depth.matches(&deep_hit));
    }

    #[test]
    fn serde_and_ordering_use_the_text() {
        let pattern = pat("**/*.key");
        assert_eq!(pattern.to_string(), "**/*.key");
        assert_eq!(format!("{pattern:?}"), "Pattern(\"**/*.key\")");
        assert!(pat("a") < pat("b"));
        assert_eq!("x/*".parse::<Pattern>().unwrap(), pat("x/*"));
    }

    // ---- reference matcher for the property test: plain recursion over the text ----

    fn reference_matches(pattern: &str, path: &str) -> bool {
        let parts: Vec<&str> = pattern.split('/').collect();
        let components: Vec<&str> = if path.is_empty() { Vec::new() } else { path.split('/').collect() };
        reference_components(&parts, &components)
    }

    fn reference_components(parts: &[&str], components: &[&str]) -> bool {
        match parts.split_first() {
            None => components.is_empty(),
            Some((&"**", rest)) => {
                reference_components(rest, components)
                    || (!components.is_empty() && reference_components(parts, &components[1..]))
            }
            Some((first, rest)) => {
                let Some((name, remaining)) = components.split_first() else { return false };
                let pattern_chars: Vec<char> = first.chars().collect();
                let name_chars: Vec<char> = name.chars().collect();
                reference_chars(&pattern_chars, &name_chars) && reference_components(rest, remaining)
            }
        }
    }

    fn reference_chars(pattern: &[char], name: &[char]) -> bool {
        match pattern.first() {
            None => name.is_empty(),
            Some('*') => {
                reference_chars(&pattern[1..], name) || (!name.is_empty() && reference_chars(pattern, &name[1..]))
            }
            Some('?') => !name.is_empty() && reference_chars(&pattern[1..], &name[1..]),
            Some('[') => {
                let close = (2..pattern.len()).find(|index| pattern[*index] == ']').expect("closed class");
                let mut body = &pattern[1..close];
                let negated = body[0] == '!' || body[0] == '^';
                if negated {
                    body = &body[1..];
                }
                let mut member = false;
                let mut index = 0;
                while index < body.len() {
                    if index + 2 < body.len() && body[index + 1] == '-' {
                        member |= !name.is_empty() && body[index] <= name[0] && name[0] <= body[index + 2];
                        index += 3;
                    } else {
                        member |= name.first() == Some(&body[index]);
                        index += 1;
                    }
                }
                !name.is_empty() && member != negated && reference_chars(&pattern[close + 1..], &name[1..])
            }
            Some(literal) => name.first() == Some(literal) && reference_chars(&pattern[1..], &name[1..]),
        }
    }

    fn pattern_component() -> impl Strategy<Value = String> {
        let token = prop::sample::select(vec!["a", "b", ".", "*", "?", "[ab]", "[!a]", "[a-b]", "[*]"]);
        prop_oneof![
            1 => Just("**".to_owned()),
            4 => prop::collection::vec(token, 1..5).prop_map(|tokens| tokens.concat()),
        ]
    }

    fn path_component() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(vec!['a', 'b', '.', '*', '?']), 1..4).prop_map(|chars| {
            let name: String = chars.into_iter().collect();
            if name == "." || name == ".." { format!("{name}a") } else { name }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn matcher_agrees_with_the_reference(
            parts in prop::collection::vec(pattern_component(), 1..5),
            components in prop::collection::vec(path_component(), 0..6),
        ) {
            let text = parts.join("/");
            let path_text = components.join("/");
            let path = if path_text.is_empty() { VPath::root() } else { VPath::parse(&path_text).unwrap() };
            prop_assert_eq!(path.as_str(), path_text.as_str());
            let invalid = parts.iter().any(|part| part == "." || part == ".." || (part != "**" && part.contains("**")));
            match Pattern::parse(&text) {
                Err(error) => prop_assert!(invalid, "{text:?} rejected: {error}"),
                Ok(pattern) => {
                    prop_assert!(!invalid, "{text:?} accepted");
                    let expected = reference_matches(&text, &path_text);
                    prop_assert_eq!(pattern.matches(&path), expected, "{} vs {}", text, path_text);
                    // A walk that steps through the components agrees, and it
                    // never prunes a prefix of a path that matches.
                    let mut state = pattern.start();
                    for (index, component) in components.iter().enumerate() {
                        if index > 0 && expected {
                            prop_assert!(pattern.can_continue(&state), "{} pruned at {}", text, index);
                        }
                        state = pattern.step(&state, component);
                    }
                    prop_assert_eq!(pattern.is_match(&state), expected, "stepped {} vs {}", text, path_text);
                    prop_assert_eq!(state.is_dead(), !expected && !pattern.can_continue(&state));
                    let insensitive = pattern.clone().case_insensitive();
                    let upper = VPath::parse(&path_text.to_uppercase()).unwrap_or(VPath::root());
                    let mut state = insensitive.start();
                    for component in upper.components() {
                        state = insensitive.step(&state, component);
                    }
                    prop_assert_eq!(insensitive.is_match(&state), insensitive.matches(&upper));
                }
            }
        }
    }

    #[test]
    fn a_walk_steps_a_pattern_of_more_than_128_components_as_it_matches() {
        // Past what the inline state holds: positions 0 to 200 and more.
        let deep = vec!["d"; 150].join("/");
        let pattern = Pattern::parse(&format!("{deep}/**/*.rs/**/x")).unwrap();
        let cases = [
            (format!("{deep}/a.rs/x"), true),
            (format!("{deep}/y/z/a.rs/w/x"), true),
            (format!("{deep}/a.rs"), false),
            (format!("{deep}/a.txt/x"), false),
            (format!("{}/a.rs/x", vec!["d"; 149].join("/")), false),
        ];
        for (path, expected) in cases {
            let path = VPath::parse(&path).unwrap();
            assert_eq!(pattern.matches(&path), expected, "{path}");
            let mut state = pattern.start();
            for component in path.components() {
                assert!(pattern.can_continue(&state) || !expected, "pruned a prefix of {path}");
                state = pattern.step(&state, component);
            }
            assert_eq!(pattern.is_match(&state), expected, "stepped {path}");
        }
        let mut state = pattern.start();
        for component in ["d", "e"] {
            state = pattern.step(&state, component);
        }
        assert!(state.is_dead() && !pattern.can_continue(&state));
    }

    #[test]
    fn a_range_of_one_character_is_a_range() {
        let pattern = Pattern::parse("[a-a]").unwrap();
        assert!(pattern.matches(&VPath::parse("a").unwrap()));
        assert!(!pattern.matches(&VPath::parse("b").unwrap()));
        assert!(Pattern::parse("[b-a]").is_err());
    }

    #[test]
    fn folding_covers_the_full_folds_and_upper_case_classes() {
        assert_eq!(fold("\u{345}"), "ι");
        assert_eq!(fold("\u{1fbe}"), "ι");
        assert_eq!(fold("Straße"), "strasse");
        assert_eq!(fold("ſ"), "s");
        assert_eq!(fold("ς"), "σ");
        let classes = Pattern::parse("[A-C]*.txt").unwrap().case_insensitive();
        for name in ["b.txt", "B.TXT", "a.Txt"] {
            assert!(classes.matches(&VPath::parse(name).unwrap()), "{name}");
        }
        assert!(!classes.matches(&VPath::parse("d.txt").unwrap()));
        let negated = Pattern::parse("[!A-C]*").unwrap().case_insensitive();
        assert!(!negated.matches(&VPath::parse("b").unwrap()));
        assert!(negated.matches(&VPath::parse("x").unwrap()));
    }

    #[test]
    fn equal_patterns_hash_alike_and_case_sensitivity_tells_them_apart() {
        use std::collections::HashSet;
        let set: HashSet<Pattern> =
            [pat("a/**"), pat("a/**"), pat("a/**").case_insensitive(), pat("b/**")].into_iter().collect();
        assert_eq!(set.len(), 3);
        assert!(set.contains(&pat("a/**").case_insensitive()));
        // The hash covers the text and the flag (SipHash: a collision here is not luck, it is a bug).
        let hash = |pattern: &Pattern| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            pattern.hash(&mut hasher);
            hasher.finish()
        };
        assert_eq!(hash(&pat("a/**")), hash(&pat("a/**")));
        assert_ne!(hash(&pat("a/**")), hash(&pat("b/**")));
        assert_ne!(hash(&pat("a/**")), hash(&pat("a/**").case_insensitive()));
    }
}
