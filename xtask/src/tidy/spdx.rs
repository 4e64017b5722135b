//! Just enough of SPDX license expressions to check a crate's license against an allow-list.
//!
//! Grammar: `expr = and ("OR" and)*`, `and = term ("AND" term)*`,
//! `term = "(" expr ")" | id ["WITH" exception]`. The old crates.io form `MIT/Apache-2.0`
//! reads as `MIT OR Apache-2.0`. A `WITH` term is allowed only if the whole
//! `id WITH exception` string is on the list, as cargo-deny does.

/// Whether `expression` is satisfied by the licenses in `allowed`, or why it cannot be read.
pub(super) fn is_allowed(expression: &str, allowed: &[String]) -> Result<bool, String> {
    let spaced = expression.replace('(', " ( ").replace(')', " ) ").replace('/', " OR ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut parser = Parser { tokens: &tokens, pos: 0, allowed };
    let result = parser.expr()?;
    match parser.tokens.get(parser.pos) {
        None => Ok(result),
        Some(token) => Err(format!("unexpected `{token}` in license expression `{expression}`")),
    }
}

struct Parser<'a> {
    tokens: &'a [&'a str],
    pos: usize,
    allowed: &'a [String],
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<&str> {
        let token = self.tokens.get(self.pos).copied();
        self.pos += 1;
        token
    }

    fn expr(&mut self) -> Result<bool, String> {
        let mut satisfied = self.and()?;
        while self.peek() == Some("OR") {
            self.pos += 1;
            // Parse the right side even when the left one already decides, to consume its tokens.
            let right = self.and()?;
            satisfied = satisfied || right;
        }
        Ok(satisfied)
    }

    fn and(&mut self) -> Result<bool, String> {
        let mut satisfied = self.term()?;
        while self.peek() == Some("AND") {
            self.pos += 1;
            let right = self.term()?;
            satisfied = satisfied && right;
        }
        Ok(satisfied)
    }

    fn term(&mut self) -> Result<bool, String> {
        match self.next() {
            Some("(") => {
                let inner = self.expr()?;
                match self.next() {
                    Some(")") => Ok(inner),
                    other => Err(format!("expected `)`, found {other:?}")),
                }
            }
            Some(token @ (")" | "AND" | "OR" | "WITH")) => Err(format!("expected a license, found `{token}`")),
            Some(id) => {
                let mut license = id.to_owned();
                if self.peek() == Some("WITH") {
                    self.pos += 1;
                    let exception = self.next().ok_or("expected an exception after `WITH`")?;
                    license = format!("{license} WITH {exception}");
                }
                Ok(self.allowed.contains(&license))
            }
            None => Err("license expression ended early".to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(expression: &str) -> Result<bool, String> {
        let allowed = ["MIT", "Apache-2.0 WITH LLVM-exception", "Unicode-3.0"].map(str::to_owned);
        is_allowed(expression, &allowed)
    }

    #[test]
    fn operators() {
        assert_eq!(check("MIT"), Ok(true));
        assert_eq!(check("GPL-3.0"), Ok(false));
        assert_eq!(check("MIT OR GPL-3.0"), Ok(true));
        assert_eq!(check("MIT AND GPL-3.0"), Ok(false));
        assert_eq!(check("(MIT OR Apache-2.0) AND Unicode-3.0"), Ok(true));
        assert_eq!(check("(GPL-3.0 OR Apache-2.0) AND Unicode-3.0"), Ok(false));
        assert_eq!(check("GPL-3.0/MIT"), Ok(true));
        assert_eq!(check("MIT OR Apache-2.0 AND GPL-3.0"), Ok(true));
    }

    #[test]
    fn exceptions_must_be_listed_whole() {
        assert_eq!(check("Apache-2.0 WITH LLVM-exception"), Ok(true));
        assert_eq!(check("MIT WITH LLVM-exception"), Ok(false));
        assert_eq!(check("Apache-2.0"), Ok(false));
    }

    #[test]
    fn malformed() {
        assert!(check("").is_err());
        assert!(check("MIT OR").is_err());
        assert!(check("(MIT").is_err());
        assert!(check("MIT)").is_err());
        assert!(check("Apache-2.0 WITH").is_err());
    }
}
