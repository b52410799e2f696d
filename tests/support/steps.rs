//! Scripts of one tool call per turn: `script(vec![bash("ls"), write("a",
//! "x")])` is a model that calls `toolu_1`, `toolu_2`, … in turn, then
//! answers "done".

use serde_json::{Value, json};

use super::mock::{Reply, Turn};

/// Each step is one tool call (`toolu_1`, `toolu_2`, …) in its own turn,
/// then a final answer.
pub(crate) fn script(steps: Vec<(&str, Value)>) -> Vec<Turn> {
    let mut turns: Vec<Turn> = steps
        .into_iter()
        .enumerate()
        .map(|(i, (tool, input))| {
            Turn::reply(Reply::new().tool_use(format!("toolu_{}", i + 1), tool, input))
        })
        .collect();
    turns.push(Turn::reply(Reply::new().text("done")));
    turns
}

pub(crate) fn bash(command: &str) -> (&'static str, Value) {
    ("bash", json!({ "command": command }))
}

pub(crate) fn write(path: &str, content: &str) -> (&'static str, Value) {
    ("write", json!({ "path": path, "content": content }))
}

/// One piece of work in two turns: `toolu_{n}` writes `content` to `path`,
/// then the model says `said` (what a test waits for on the screen).
pub(crate) fn write_then_say(n: usize, path: &str, content: &str, said: &str) -> [Turn; 2] {
    [
        Turn::reply(Reply::new().tool_use(
            format!("toolu_{n}"),
            "write",
            json!({ "path": path, "content": content }),
        )),
        Turn::reply(Reply::new().text(said)),
    ]
}
