//! Earlier edit calls rewritten for a model offered the other edit tool.

use serde_json::json;

use super::*;

fn tools(names: &[&str]) -> Vec<ToolDef> {
    names
        .iter()
        .map(|name| ToolDef {
            name: (*name).to_string(),
            description: String::new(),
            input_schema: json!({"type": "object"}),
        })
        .collect()
}

fn call(id: &str, name: &str, input: Value) -> Block {
    Block::ToolUse {
        id: id.into(),
        name: name.into(),
        input,
    }
}

fn result(id: &str, content: &str, is_error: bool) -> Block {
    Block::ToolResult {
        tool_use_id: id.into(),
        content: content.into(),
        is_error,
    }
}

fn text(text: &str) -> Block {
    Block::Text { text: text.into() }
}

fn turn(calls: Vec<Block>, results: Vec<Block>) -> Vec<Message> {
    vec![
        Message::user_text("go"),
        Message {
            role: Role::Assistant,
            content: calls,
        },
        Message {
            role: Role::User,
            content: results,
        },
    ]
}

#[test]
fn an_edit_becomes_the_same_change_as_a_patch_with_its_id_and_result() {
    let edit = json!({"path": "src/a.rs", "old_string": "fn a() {\n    1\n}", "new_string": "fn a() {\n    2\n}"});
    let sent = map_edit_calls(
        turn(
            vec![call("toolu_1", "edit", edit)],
            vec![result("toolu_1", "Edited /work/src/a.rs", false)],
        ),
        &tools(&["read", "write", "apply_patch", "bash"]),
    );
    assert_eq!(
        sent[1].content,
        vec![call(
            "toolu_1",
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Update File: src/a.rs\n@@\n\
                -fn a() {\n-    1\n-}\n+fn a() {\n+    2\n+}\n*** End Patch"})
        )]
    );
    assert_eq!(
        sent[2].content,
        vec![result("toolu_1", "Edited /work/src/a.rs", false)]
    );
}

#[test]
fn a_patch_shown_to_an_edit_model_becomes_text_after_the_paired_results() {
    let patch = "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch";
    let sent = map_edit_calls(
        turn(
            vec![
                text("Two things."),
                call("call_1", "apply_patch", json!({ "input": patch })),
                call("call_2", "bash", json!({"command": "ls"})),
            ],
            vec![
                result("call_1", "Applied the patch:\nD /work/a.txt\n", false),
                result("call_2", "b.txt", false),
                text("[ah: a note]"),
            ],
        ),
        &tools(&["read", "write", "edit", "bash"]),
    );
    assert_eq!(
        sent[1].content,
        vec![
            text("Two things."),
            text(&format!(
                "[I called the tool `apply_patch`, which is not offered any more, with:\n{patch}]"
            )),
            call("call_2", "bash", json!({"command": "ls"})),
        ]
    );
    assert_eq!(
        sent[2].content,
        vec![
            result("call_2", "b.txt", false),
            text("[The `apply_patch` call returned:\nApplied the patch:\nD /work/a.txt\n]"),
            text("[ah: a note]"),
        ]
    );
}

#[test]
fn a_replace_all_edit_becomes_text_and_a_failure_says_so() {
    let edit = json!({"path": "a", "old_string": "x", "new_string": "y", "replace_all": true});
    let sent = map_edit_calls(
        turn(
            vec![call("toolu_9", "edit", edit)],
            vec![result("toolu_9", "old_string was not found", true)],
        ),
        &tools(&["apply_patch"]),
    );
    let Block::Text { text: said } = &sent[1].content[0] else {
        panic!("{:?}", sent[1]);
    };
    assert!(
        said.starts_with("[I called the tool `edit`") && said.contains("\"replace_all\": true"),
        "{said}"
    );
    assert_eq!(
        sent[2].content,
        vec![text("[The `edit` call failed:\nold_string was not found]")]
    );
}

#[test]
fn nothing_changes_when_the_offered_tool_is_the_one_called_or_none_is_offered() {
    let stored = turn(
        vec![call(
            "toolu_1",
            "edit",
            json!({"path": "a", "old_string": "x", "new_string": "y"}),
        )],
        vec![result("toolu_1", "ok", false)],
    );
    assert_eq!(
        map_edit_calls(stored.clone(), &tools(&["edit", "bash"])),
        stored
    );
    assert_eq!(map_edit_calls(stored.clone(), &tools(&["read"])), stored);
}

#[test]
fn a_patch_stored_under_its_old_field_name_is_shown_under_input() {
    let patch = "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch";
    let stored = |field: &str| {
        turn(
            vec![call("call_1", "apply_patch", json!({ field: patch }))],
            vec![result(
                "call_1",
                "Applied the patch:\nD /work/a.txt\n",
                false,
            )],
        )
    };
    for offered in [
        &["apply_patch", "bash"][..],
        &["edit", "apply_patch"],
        &["bash"],
    ] {
        assert_eq!(
            map_edit_calls(stored("patch"), &tools(offered)),
            stored("input"),
            "{offered:?}"
        );
    }
    let Block::Text { text: said } =
        &map_edit_calls(stored("patch"), &tools(&["edit"]))[1].content[0]
    else {
        panic!("the call was not turned into text");
    };
    assert!(said.ends_with(&format!("with:\n{patch}]")), "{said}");
}
