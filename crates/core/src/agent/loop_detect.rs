//! Loop detection: notices when the model keeps making the same tool calls
//! and getting the same results, so the loop can tell it to change approach,
//! and stop the run when telling it does not help.
//!
//! A call's [`Signature`] is its tool name, a SHA-256 digest of its input as
//! canonical JSON (object keys sorted at every level), so the same input with
//! its keys in another order is the same call, and a SHA-256 digest of its
//! result as the model was told it (the text and whether it is an error).
//! Only the same call with the same result, repeated, is a loop: polling a
//! build log or re-running a flaky test whose output changes is not.
//!
//! What the tools tell the model holds no timings or other per-call noise:
//! `bash` gives stdout, stderr and the exit code (its duration goes to the
//! details only), `read` the lines, `edit` a summary and the edited region,
//! `write` the path and size; a policy violation adds a report that names
//! no step. The one exception is the note naming the step file with the
//! whole output when the model's copy was cut (`steps/step-N.out`); its path
//! is left out of the digest (`stable_result`; `tests/loops.rs` fails if the
//! note's wording changes under it). Noise that a command prints
//! itself (a test runner's "finished in 0.52s") does make results differ, so
//! a model re-running such a command is not caught by this rule.
//!
//! The rule: the detector keeps the signatures of the last `window` calls
//! that ran since the run started or since the last detection. A repetition
//! is found when that window is full and the whole of it is one pattern of
//! 1, 2 or 3 calls repeated from its first call on, the last repeat possibly
//! cut short (`AAAAAAAAAA`, `ABABABABAB`, `ABCABCABCA`), and the pattern fits
//! in the window at least twice. The shortest such pattern is reported. A
//! detection empties the window, so the same repetition is found again only
//! after another `window` calls that repeat. A window of 0 turns detection
//! off; a window of 1 can never hold a pattern twice, so it finds nothing.
//! Only calls that ran count: one cut off by the output limit or refused by
//! `--max-tools` is not recorded.
//!
//! The loop adds each detection's steering text after the tool results of
//! the turn it happened in, and ends the run after that turn once
//! [`MAX_DETECTIONS`] were made in it ([`LoopDetector::should_stop`]).

use std::borrow::Cow;
use std::collections::VecDeque;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::event::Event;
use ah_llm::Block;
use ah_session::BlockRecord;
use ah_tools::{STEP_FILE_NOTE, STEP_FILE_NOTE_END, ToolOutput};

/// How many calls the detector looks at unless told otherwise.
pub const DEFAULT_WINDOW: usize = 10;

/// After this many detections in one run the run is stopped.
pub const MAX_DETECTIONS: u32 = 3;

/// The longest pattern of calls looked for.
const LONGEST_PATTERN: usize = 3;

/// How much of a call's input the steering message quotes.
const SHOWN_INPUT_CHARS: usize = 200;

/// What makes two tool calls the same call with the same result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    tool: String,
    input_digest: [u8; 32],
    result_digest: [u8; 32],
}

impl Signature {
    pub fn of(tool: &str, input: &Value, result: &ToolOutput) -> Signature {
        let mut told = Sha256::new();
        told.update([u8::from(result.is_error)]);
        told.update(stable_result(&result.content).as_bytes());
        Signature {
            tool: tool.to_string(),
            input_digest: Sha256::digest(canonical_json(input).as_bytes()).into(),
            result_digest: told.finalize().into(),
        }
    }
}

/// What the model was told with the step file's path taken out of the note
/// that names it, so the same cut output is the same result at every step.
/// The note comes after the output it follows, so it is the last one.
fn stable_result(content: &str) -> Cow<'_, str> {
    let Some(start) = content.rfind(STEP_FILE_NOTE) else {
        return Cow::Borrowed(content);
    };
    let path_start = start + STEP_FILE_NOTE.len();
    let Some(path_len) = content[path_start..].find(STEP_FILE_NOTE_END) else {
        return Cow::Borrowed(content);
    };
    Cow::Owned(format!(
        "{}{}",
        &content[..path_start],
        &content[path_start + path_len..]
    ))
}

/// `value` as compact JSON with the keys of every object sorted, whatever
/// order they arrived in. serde_json's own order depends on a crate feature
/// (`preserve_order`) that any dependency may turn on, so it is not relied on.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// One call as the detector remembers it.
#[derive(Debug, Clone)]
struct Call {
    signature: Signature,
    /// The tool and a short form of its input, for the steering message.
    shown: String,
}

/// A repetition that was found: the pattern and how often it filled the
/// window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repetition {
    /// How many calls the window held.
    pub window: usize,
    /// How many calls the repeated pattern has (1 to 3).
    pub pattern_len: usize,
    /// How many whole times the pattern fills the window.
    pub repeats: usize,
    /// The tool of each call of the pattern, in order.
    pub tools: Vec<String>,
    /// Each call of the pattern: its tool and (shortened) canonical input.
    pub calls: Vec<String>,
    /// Which detection of the run this is (1 for the first).
    pub detection: u32,
}

impl Repetition {
    /// The event that reports it.
    pub fn event(&self) -> Event {
        Event::LoopDetected {
            pattern_len: self.pattern_len as u32,
            repeats: self.repeats as u32,
            tools: self.tools.clone(),
        }
    }

    /// What the model is told, after the results of the turn's calls.
    pub fn steering(&self) -> String {
        let what = if self.pattern_len == 1 {
            "the same call".to_string()
        } else {
            format!("the same {} calls", self.pattern_len)
        };
        let mut text = format!(
            "[ah: loop detected] Your last {} tool calls repeat {what} {} times, with the same \
             results each time:\n",
            self.window, self.repeats
        );
        for (i, call) in self.calls.iter().enumerate() {
            text.push_str(&format!("  {}. {call}\n", i + 1));
        }
        text.push_str(&format!(
            "Repeating them will not give you anything new. Change approach: re-read the task and \
             the results you got, try a different tool or different input, or, if you are blocked, \
             say what blocks you and end your turn. This is warning {} of {MAX_DETECTIONS}: ah stops \
             the run after {MAX_DETECTIONS} such warnings.",
            self.detection
        ));
        text
    }

    /// The steering message as a block of the user message that carries the
    /// turn's tool results.
    pub fn steering_block(&self) -> BlockRecord {
        BlockRecord::from(Block::Text {
            text: self.steering(),
        })
    }
}

/// Watches the calls of one run (one user input) for repetitions.
#[derive(Debug)]
pub struct LoopDetector {
    window: usize,
    recent: VecDeque<Call>,
    detections: u32,
}

impl LoopDetector {
    /// A detector looking at the last `window` calls; 0 turns it off.
    pub fn new(window: usize) -> LoopDetector {
        LoopDetector {
            window,
            recent: VecDeque::with_capacity(window),
            detections: 0,
        }
    }

    /// Notes a call that ran and what the model was told of it; returns the
    /// repetition it completes, if any.
    pub fn record(&mut self, tool: &str, input: &Value, result: &ToolOutput) -> Option<Repetition> {
        if self.window == 0 {
            return None;
        }
        if self.recent.len() == self.window {
            self.recent.pop_front();
        }
        self.recent.push_back(Call {
            signature: Signature::of(tool, input, result),
            shown: shown(tool, input),
        });
        if self.recent.len() < self.window {
            return None;
        }
        let pattern_len = (1..=LONGEST_PATTERN)
            .filter(|len| 2 * len <= self.window)
            .find(|&len| self.repeats_with_period(len))?;
        self.detections += 1;
        let pattern: Vec<Call> = self.recent.drain(..).take(pattern_len).collect();
        Some(Repetition {
            window: self.window,
            pattern_len,
            repeats: self.window / pattern_len,
            tools: pattern.iter().map(|c| c.signature.tool.clone()).collect(),
            calls: pattern.into_iter().map(|c| c.shown).collect(),
            detection: self.detections,
        })
    }

    /// Whether the run has repeated itself often enough to be stopped.
    pub fn should_stop(&self) -> bool {
        self.detections >= MAX_DETECTIONS
    }

    /// Every call in the window equals the one `len` calls before it.
    fn repeats_with_period(&self, len: usize) -> bool {
        (len..self.recent.len()).all(|i| self.recent[i].signature == self.recent[i - len].signature)
    }
}

/// `tool {input}` on one line, the input cut to a readable length.
fn shown(tool: &str, input: &Value) -> String {
    let json = canonical_json(input);
    let mut short: String = json.chars().take(SHOWN_INPUT_CHARS).collect();
    if short.len() < json.len() {
        short.push('…');
    }
    format!("{tool} {short}")
}

#[cfg(test)]
mod tests;
