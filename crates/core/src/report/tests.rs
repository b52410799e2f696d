use super::*;
use ah_record::rundir::PatchStats;

fn run(task: &str) -> RunView {
    RunView {
        id: "01HZY8J5Q8W3V4N1T2C6B7D9EF".to_string(),
        manifest: Some(Manifest {
            task: task.to_string(),
            started_at: "2024-02-29T12:00:00.000Z".to_string(),
            finished_at: Some("2024-02-29T12:00:02.500Z".to_string()),
            patch: Some(PatchStats {
                files: 1,
                added: 2,
                removed: 1,
            }),
            ..Manifest::default()
        }),
        problem: None,
        tokens: Tokens {
            input_tokens: 10,
            output_tokens: 5,
        },
        turns: vec![Turn {
            seq: 2,
            model_ms: 1200,
            tool_ms: 300,
            tools: vec!["<bash>".to_string()],
        }],
        timeline_note: None,
        check_log: Some(Bounded {
            bytes: b"$ make\n</pre><script>x()</script>".to_vec(),
            cut: true,
        }),
        patch: None,
    }
}

#[test]
fn report_escapes_everything_a_run_left() {
    let page = html::page(&[run("<script>alert(1)</script> & 'q' \"d\"")], None);
    assert!(!page.contains("<script>alert"), "{page}");
    assert!(!page.contains("<script>x()"), "{page}");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &#39;q&#39; &quot;d&quot;"));
    assert!(page.contains("&lt;bash&gt;"));
    assert_eq!(
        page.matches("<script").count(),
        1,
        "only the page's own script"
    );
    assert!(
        !page.contains("://") && !page.contains("javascript:"),
        "no address at all"
    );
    assert!(page.contains("only its first 64 KiB"));
    assert!(page.contains("data-sort=\"2500\">2.5 s"));
    assert!(page.contains("<td class=\"num\" data-sort=\"15\">15</td>"));
}

#[test]
fn report_reads_ah_times() {
    assert_eq!(
        timeline::parse_rfc3339_ms("1970-01-02T00:00:01.250Z"),
        Some(86_401_250)
    );
    let now = std::time::SystemTime::now();
    let ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert_eq!(
        timeline::parse_rfc3339_ms(&ah_base::format_rfc3339(now)),
        Some(ms)
    );
    assert_eq!(timeline::parse_rfc3339_ms("yesterday"), None);
}

#[test]
fn report_reads_a_batch_results_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.jsonl");
    std::fs::write(
        &path,
        "{\"id\":\"<t1>\",\"runs\":[\"A\",\"B\"],\"status\":\"done\",\"files\":1,\"added\":3,\
         \"removed\":0,\"tokens\":{\"input_tokens\":7,\"output_tokens\":1},\"duration_ms\":900,\
         \"applied\":true}\nnot json\n",
    )
    .unwrap();
    let tasks = read_results(&path).unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].runs, ["A", "B"]);
    let page = html::page(&[], Some(&tasks));
    assert!(page.contains("<td>&lt;t1&gt;</td>"), "{page}");
    assert!(page.contains("data-sort=\"8\">8</td>"));
}

#[test]
fn report_bounded_reads_refuse_links_and_fifos() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "0123456789").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link")).unwrap();
    let cut = bounded::read(dir.path(), "f", 4).unwrap().unwrap();
    assert_eq!((cut.bytes.as_slice(), cut.cut), (&b"0123"[..], true));
    assert!(bounded::read(dir.path(), "link", 4).is_err());
    assert!(bounded::read(dir.path(), "none", 4).unwrap().is_none());
    let fifo = dir.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    assert!(bounded::read(dir.path(), "fifo", 4).is_err());
}

fn message(
    seq: i64,
    parent: Option<i64>,
    role: ah_llm::Role,
    blocks: Vec<ah_session::BlockRecord>,
) -> ah_session::StoredMessage {
    ah_session::StoredMessage {
        id: format!("m{seq}"),
        parent_id: parent.map(|p| format!("m{p}")),
        role,
        seq,
        created_at: String::new(),
        meta: ah_session::MessageMeta {
            usage: Some(ah_llm::Usage {
                input_tokens: 100,
                output_tokens: 10,
                ..ah_llm::Usage::default()
            }),
            api_latency_ms: Some(seq as u64 * 1000),
            ..ah_session::MessageMeta::default()
        },
        agent: None,
        blocks,
    }
}

fn call(name: &str) -> ah_session::BlockRecord {
    ah_llm::Block::ToolUse {
        id: name.to_string(),
        name: name.to_string(),
        input: serde_json::json!({}),
    }
    .into()
}

fn result(run: &str, ms: u64) -> ah_session::BlockRecord {
    let mut record = ah_session::BlockRecord::tool_result("t", "bash", String::new(), false);
    record.duration_ms = Some(ms);
    record.details = Some(serde_json::json!({"run_id": run}));
    record
}

#[test]
fn report_timeline_takes_the_run_s_turns_and_no_other_s() {
    use ah_llm::Role::{Assistant, User};
    let messages = [
        message(
            1,
            None,
            User,
            vec![
                ah_llm::Block::Text {
                    text: "task".into(),
                }
                .into(),
            ],
        ),
        message(2, Some(1), Assistant, vec![call("bash"), call("read")]),
        message(3, Some(2), User, vec![result("R", 300), result("R", 200)]),
        message(
            4,
            Some(3),
            Assistant,
            vec![
                ah_llm::Block::Text {
                    text: "done".into(),
                }
                .into(),
            ],
        ),
        // Another run's turn on another branch.
        message(5, Some(1), Assistant, vec![call("bash")]),
        message(6, Some(5), User, vec![result("OTHER", 9000)]),
    ];
    let (turns, tokens) = timeline::turns_of(&messages, "R");
    assert_eq!(
        turns,
        [
            Turn {
                seq: 2,
                model_ms: 2000,
                tool_ms: 500,
                tools: vec!["bash".into(), "read".into()]
            },
            Turn {
                seq: 4,
                model_ms: 4000,
                tool_ms: 0,
                tools: vec![]
            },
        ]
    );
    assert_eq!((tokens.input_tokens, tokens.output_tokens), (200, 20));
    let chart = timeline::svg(&turns);
    assert_eq!(chart.matches("<g class=\"turn\">").count(), 2);
    assert!(chart.contains("2.0 s + 500 ms"), "{chart}");
}
