//! Chat templates render exactly as `transformers.apply_chat_template` (Jinja2 with
//! trim_blocks/lstrip_blocks, HF's `tojson`, `raise_exception`) renders them; the expected
//! strings were recorded by `fixtures/make_chat_fixtures.py`.

use hier_backbone::{ChatTemplate, Message};
use serde_json::Value;

#[test]
fn templates_render_like_transformers() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat/templates.json");
    let all: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut checked = 0;
    for t in &all {
        let name = t["name"].as_str().unwrap();
        let special: Vec<(String, String)> = t["special_tokens"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect();
        let tmpl = ChatTemplate::new(t["template"].as_str().unwrap(), special).unwrap();
        for case in t["cases"].as_array().unwrap() {
            let messages: Vec<Message> = case["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
                .collect();
            let got = tmpl.render(&messages, case["add_generation_prompt"].as_bool().unwrap());
            match case["rendered"].as_str() {
                Some(want) => assert_eq!(got.unwrap(), want, "{name}: {messages:?}"),
                None => {
                    let e = got.unwrap_err().to_string();
                    assert!(
                        e.contains(case["error"].as_str().unwrap()),
                        "{name}: error {e:?} vs {:?}",
                        case["error"]
                    );
                }
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 24);
}

#[test]
fn raise_exception_and_syntax_errors_are_reported() {
    let t = ChatTemplate::new("{{ raise_exception('no system messages') }}", vec![]).unwrap();
    assert!(
        t.render(&[Message::new("user", "x")], false)
            .unwrap_err()
            .to_string()
            .contains("no system messages")
    );
    assert!(
        ChatTemplate::new("{% for %}", vec![])
            .unwrap_err()
            .to_string()
            .contains("chat template")
    );
}
