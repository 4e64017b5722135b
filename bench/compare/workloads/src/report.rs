//! What an engine binary prints (one JSON object a line: `info`, `sample`,
//! `metric`), and the statistics the driver computes from it.

use std::io::Write;

use serde_json::{Value, json};

/// One timed iteration.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// The wall time of what the workload times, in nanoseconds.
    pub wall_ns: u64,
    /// Named parts, in nanoseconds: the engine's receipt stages and the
    /// workload's own timings of its calls.
    pub stages: Vec<(String, u64)>,
    /// How the transaction reached its end (`auto`, `preview+approve+commit`, ...).
    pub path: Option<&'static str>,
}

/// Prints one engine's lines for one workload on stdout.
#[derive(Debug)]
pub struct Emitter {
    engine: String,
    workload: String,
    round: u64,
    index: usize,
}

impl Emitter {
    /// Lines for `workload` run by `engine` in driver round `round`.
    pub fn new(engine: &str, workload: &str, round: u64) -> Self {
        Self { engine: engine.to_owned(), workload: workload.to_owned(), round, index: 0 }
    }

    /// The workload's name.
    pub fn workload(&self) -> &str {
        &self.workload
    }

    fn line(&self, value: &Value) {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{value}");
        let _ = stdout.flush();
    }

    /// Describe the engine.
    pub fn info(&self, describe: &str) {
        self.line(&json!({"type": "info", "engine": self.engine, "workload": self.workload, "describe": describe}));
    }

    /// One timed sample.
    pub fn sample(&mut self, sample: &Sample) {
        let stages: serde_json::Map<String, Value> =
            sample.stages.iter().map(|(name, value)| (name.clone(), json!(value))).collect();
        self.line(&json!({
            "type": "sample",
            "engine": self.engine,
            "workload": self.workload,
            "round": self.round,
            "index": self.index,
            "wall_ns": sample.wall_ns,
            "stages": stages,
            "path": sample.path,
        }));
        self.index += 1;
    }

    /// A number about the whole run (`combine`: how the driver merges the
    /// rounds' values: `median` or `sum`).
    pub fn metric(&self, name: &str, value: f64, combine: &str) {
        self.line(&json!({
            "type": "metric",
            "engine": self.engine,
            "workload": self.workload,
            "round": self.round,
            "name": name,
            "value": value,
            "combine": combine,
        }));
    }
}

/// The `fraction` percentile of `values` (nearest rank on the sorted values);
/// `None` when there are none.
pub fn percentile(values: &[f64], fraction: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let rank = ((fraction * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// p50 and p95 of `values`.
pub fn p50_p95(values: &[f64]) -> Option<(f64, f64)> {
    Some((percentile(values, 0.5)?, percentile(values, 0.95)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.5), Some(10.0));
        assert_eq!(percentile(&values, 0.95), Some(19.0));
        assert_eq!(percentile(&[3.0], 0.95), Some(3.0));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
