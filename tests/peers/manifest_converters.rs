//! `scripts/manifests.py` converts every corpus in ../shared/data into manifests; every
//! file it writes must load with `Manifest::load`, carry the counts SOURCES.md states (minus
//! the documented label-quality drops), and keep the protocols leak-free. Skipped with a
//! message when ../shared/data is absent.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use sarcasmd::tools::manifest::{Manifest, ManifestItem};

const FILES: &[&str] = &[
    "mustard.jsonl",
    "mustard_plus_plus.jsonl",
    "mustard-si.train.jsonl",
    "mustard-si.test.jsonl",
    "mmsd2.0.jsonl",
    "sarcnet.jsonl",
    "isarcasmeval-en.jsonl",
    "figlang2020-reddit.jsonl",
    "figlang2020-twitter.jsonl",
    "news_headlines.jsonl",
    "sarcasm_sign.jsonl",
    "speech.jsonl",
    "speech_cmpt419.jsonl",
];

/// Python's `re.sub(r"\s+", " ", re.sub(r"[^\w\s]", "", s.lower())).strip()`, close enough
/// for the overlap checks (`\w` = alphanumeric or `_`).
fn norm(s: &str) -> String {
    let kept: String = s
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_' || c.is_whitespace())
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn sarcastic(items: &[&ManifestItem]) -> usize {
    items.iter().filter(|i| i.label == Some(true)).count()
}

fn in_split<'a>(m: &'a Manifest, split: &str) -> Vec<&'a ManifestItem> {
    m.items
        .iter()
        .filter(|i| i.split.as_deref() == Some(split))
        .collect()
}

/// (items, sarcastic) of one split.
fn count(m: &Manifest, split: &str) -> (usize, usize) {
    let s = in_split(m, split);
    (s.len(), sarcastic(&s))
}

/// Keys the parser ignores (`show`, `cv_fold`), read from the raw lines.
fn raw_field(path: &Path, key: &str) -> HashMap<String, serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["id"].as_str().unwrap().to_string(),
                v.get(key).cloned().unwrap_or(serde_json::Value::Null),
            )
        })
        .collect()
}

#[test]
fn every_corpus_converts_to_a_loadable_manifest_with_the_documented_counts() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = repo.join("../shared/data");
    if !data.is_dir() {
        eprintln!(
            "SKIPPED: {} is absent; the corpora are needed to test scripts/manifests.py",
            data.display()
        );
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let run = Command::new("python3")
        .arg(repo.join("scripts/manifests.py"))
        .arg("--data")
        .arg(&data)
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("python3");
    let stdout = String::from_utf8_lossy(&run.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "scripts/manifests.py failed");

    let path = |f: &str| -> PathBuf { out.path().join(f) };
    let mut m: BTreeMap<&str, Manifest> = BTreeMap::new();
    for f in FILES {
        let loaded = Manifest::load(&path(f)).unwrap_or_else(|e| panic!("{e}"));
        assert!(!loaded.items.is_empty(), "{f} is empty");
        for it in &loaded.items {
            assert!(it.label.is_some(), "{f}: {} has no label", it.id);
        }
        m.insert(f, loaded);
    }
    let produced: HashSet<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let expected: HashSet<String> = FILES.iter().map(|s| s.to_string()).collect();
    assert_eq!(produced, expected, "unexpected set of output files");

    // MUStARD: 690 = 345/345; speaker-independent test = FRIENDS = 356 (152 sarcastic).
    let mu = &m["mustard.jsonl"];
    let all: Vec<_> = mu.items.iter().collect();
    assert_eq!((all.len(), sarcastic(&all)), (690, 345));
    assert_eq!(count(mu, "test"), (356, 152));
    assert_eq!(count(mu, "train").0, 334);
    let folds = raw_field(&path("mustard.jsonl"), "cv_fold");
    let mut per_fold: BTreeMap<i64, usize> = BTreeMap::new();
    for v in folds.values() {
        *per_fold.entry(v.as_i64().expect("cv_fold")).or_default() += 1;
    }
    assert_eq!(per_fold.values().copied().collect::<Vec<_>>(), vec![138; 5]);
    let show = raw_field(&path("mustard.jsonl"), "show");
    for it in &mu.items {
        let friends = show[&it.id] == "FRIENDS";
        assert_eq!(friends, it.split.as_deref() == Some("test"), "{}", it.id);
        assert_eq!(it.group.as_deref(), it.id.strip_prefix("mustard:"));
        assert!(it.context.iter().all(|c| !c.text().is_empty()));
    }

    // MUStARD++: 1202 = 601/601, 5 folds of balanced size and label, scenes whole.
    let pp = &m["mustard_plus_plus.jsonl"];
    let all: Vec<_> = pp.items.iter().collect();
    assert_eq!((all.len(), sarcastic(&all)), (1202, 601));
    let mut fold_sizes: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut fold_of_group: HashMap<&str, &str> = HashMap::new();
    for it in &pp.items {
        let f = it.split.as_deref().expect("MUStARD++ fold");
        let e = fold_sizes.entry(f.to_string()).or_default();
        e.0 += 1;
        e.1 += usize::from(it.label == Some(true));
        let g = it.group.as_deref().expect("group");
        assert_eq!(
            *fold_of_group.entry(g).or_insert(f),
            f,
            "scene {g} in two folds"
        );
        for (v, k) in [(it.valence, "valence"), (it.arousal, "arousal")] {
            let v = v.unwrap_or_else(|| panic!("{}: no {k}", it.id));
            assert!((1.0..=9.0).contains(&v), "{}: {k} {v}", it.id);
        }
        assert!(it.sarcasm_type.is_some() && it.emotion_implicit.is_some());
    }
    assert_eq!(
        fold_sizes.keys().cloned().collect::<Vec<_>>(),
        ["fold0", "fold1", "fold2", "fold3", "fold4"]
    );
    let sizes: Vec<usize> = fold_sizes.values().map(|v| v.0).collect();
    let sarc: Vec<usize> = fold_sizes.values().map(|v| v.1).collect();
    assert!(
        sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
        "{sizes:?}"
    );
    assert!(
        sarc.iter().max().unwrap() - sarc.iter().min().unwrap() <= 1,
        "{sarc:?}"
    );
    let malformed = pp
        .items
        .iter()
        .find(|i| i.id == "mpp:1_S11E03_067")
        .expect("the malformed MUStARD++ row");
    assert_eq!(
        malformed.text.as_deref(),
        Some("I'm not setting her up with Raj.")
    );
    assert_eq!(malformed.label, Some(false));
    assert!(!malformed.context.is_empty());

    // Speaker-independent protocol: no FRIENDS and no test scene in training.
    let si_test = &m["mustard-si.test.jsonl"];
    let si_train = &m["mustard-si.train.jsonl"];
    let t: Vec<_> = si_test.items.iter().collect();
    assert_eq!((t.len(), sarcastic(&t)), (356, 152));
    let train_show = raw_field(&path("mustard-si.train.jsonl"), "show");
    let test_show = raw_field(&path("mustard-si.test.jsonl"), "show");
    assert!(test_show.values().all(|s| s == "FRIENDS"));
    assert!(
        train_show.values().all(|s| s.is_string() && s != "FRIENDS"),
        "FRIENDS in SI train"
    );
    let test_ids: HashSet<&str> = si_test.items.iter().map(|i| i.id.as_str()).collect();
    let test_groups: HashSet<&str> = si_test
        .items
        .iter()
        .map(|i| i.group.as_deref().unwrap())
        .collect();
    for it in &si_train.items {
        assert!(!test_ids.contains(it.id.as_str()), "{} in both", it.id);
        let g = it.group.as_deref().unwrap();
        assert!(!test_groups.contains(g), "scene {g} in both");
        let scene = it.id.split_once(':').unwrap().1;
        assert!(!test_groups.contains(scene), "scene {scene} in both");
    }
    // 334 MUStARD + the 514 MUStARD++ scenes that are neither FRIENDS nor MUStARD ids.
    assert_eq!(si_train.items.len(), 334 + 514);
    let mustard_groups: HashSet<&str> = mu
        .items
        .iter()
        .map(|i| i.group.as_deref().unwrap())
        .collect();
    let from_pp = si_train.items.iter().filter(|i| i.id.starts_with("mpp:"));
    for it in from_pp {
        assert!(!mustard_groups.contains(it.group.as_deref().unwrap()));
    }

    // MMSD2.0: official test intact; train/dev lose the texts that occur in test.
    let mm = &m["mmsd2.0.jsonl"];
    assert_eq!(count(mm, "test"), (2409, 1037));
    assert_eq!(count(mm, "train").0, 19816 - 357 - 1);
    assert_eq!(count(mm, "dev").0, 2410 - 28);
    assert_no_test_text_outside_test(mm);

    // SarcNet: Multi_label as label, Text_label as labels.text; test intact.
    let sn = &m["sarcnet.jsonl"];
    assert_eq!(count(sn, "test"), (666, 387));
    // Train/dev items whose normalised text occurs in test are dropped (10 and 7).
    assert_eq!(count(sn, "train").0, 1998 - 10);
    assert_eq!(count(sn, "dev").0, 671 - 7);
    assert_no_test_text_outside_test(sn);
    assert!(sn.items.iter().all(|i| i.modality_labels.text.is_some()));
    let lang = raw_field(&path("sarcnet.jsonl"), "language");
    let zh = lang.values().filter(|v| *v == "zh").count();
    assert!(lang.values().all(|v| v == "zh" || v == "en"));
    assert!(
        (0.55..0.70).contains(&(zh as f64 / lang.len() as f64)),
        "{zh} zh"
    );

    // iSarcasmEval EN: train 3468 minus the empty tweet; test 1400 with 5 annotators each.
    let is = &m["isarcasmeval-en.jsonl"];
    assert_eq!(count(is, "train"), (3467, 867));
    assert_eq!(count(is, "test"), (1400, 200));
    let annotated: Vec<_> = in_split(is, "test")
        .into_iter()
        .filter(|i| !i.annotators.is_empty())
        .collect();
    assert_eq!(
        annotated.len(),
        1400,
        "annotation rows matched to test rows"
    );
    assert!(annotated.iter().all(|i| i.annotators.len() == 5));
    assert!(in_split(is, "train")
        .iter()
        .all(|i| i.annotators.is_empty()));

    // FigLang 2020.
    let rd = &m["figlang2020-reddit.jsonl"];
    assert_eq!(count(rd, "train"), (4400, 2200));
    assert_eq!(count(rd, "test"), (1800, 900));
    let tw = &m["figlang2020-twitter.jsonl"];
    assert_eq!(count(tw, "test"), (1800, 900));
    // 5000 - 262 extra copies of a normalised response (255 + 7 that differ only in @USER /
    // <URL>) - the conflicting pair's other copy - 1 response also in test.
    assert_eq!(count(tw, "train").0, 5000 - 262 - 1 - 1);
    for f in [rd, tw] {
        assert!(f.items.iter().all(|i| !i.context.is_empty()));
        let mut seen = HashSet::new();
        for it in in_split(f, "train") {
            assert!(seen.insert(norm(it.text.as_deref().unwrap())), "{}", it.id);
        }
    }

    // News headlines: all of v1, no split.
    let nw = &m["news_headlines.jsonl"];
    let all: Vec<_> = nw.items.iter().collect();
    assert_eq!((all.len(), sarcastic(&all)), (26709, 11724));
    assert!(nw.items.iter().all(|i| i.split.is_none()));

    // Sarcasm SIGN: each tweet (label 1) with its literal rewrites (label 0) in one group.
    let sg = &m["sarcasm_sign.jsonl"];
    for (split, tweets) in [("train", 2290), ("dev", 270), ("test", 265)] {
        let items = in_split(sg, split);
        assert_eq!(sarcastic(&items), tweets, "{split}");
        let groups_with_tweet: HashSet<&str> = items
            .iter()
            .filter(|i| i.label == Some(true))
            .map(|i| i.group.as_deref().unwrap())
            .collect();
        assert_eq!(groups_with_tweet.len(), tweets);
        let rewrites: Vec<_> = items.iter().filter(|i| i.label == Some(false)).collect();
        assert!(
            rewrites.len() > 3 * tweets,
            "{split}: {} rewrites",
            rewrites.len()
        );
        for r in rewrites {
            assert!(groups_with_tweet.contains(r.group.as_deref().unwrap()));
        }
    }

    // Speech: 129 House + 31 MUStARD++ samples, absolute media paths that exist.
    let sp = &m["speech.jsonl"];
    let all: Vec<_> = sp.items.iter().collect();
    assert_eq!((all.len(), sarcastic(&all)), (160, 98));
    for it in &sp.items {
        let a = it.audio.as_deref().expect("audio");
        assert!(a.is_absolute() && a.is_file(), "{}", a.display());
        if let Some(v) = it.video.as_deref() {
            assert!(v.is_absolute() && v.is_file(), "{}", v.display());
        }
        assert!(it.group.is_some() && it.text.is_some());
    }
    assert_eq!(sp.items.iter().filter(|i| i.video.is_some()).count(), 129);

    // The second show-apart speech corpus: 210 MUStARD++ clips (105/105) with their TV
    // audio and video, grouped by scene, with speaker and context turns.
    let cm = &m["speech_cmpt419.jsonl"];
    let all: Vec<_> = cm.items.iter().collect();
    assert_eq!((all.len(), sarcastic(&all)), (210, 105));
    for it in &cm.items {
        assert!(it.id.starts_with("cmpt419:"), "{}", it.id);
        let a = it.audio.as_deref().expect("audio");
        assert!(a.is_absolute() && a.is_file(), "{}", a.display());
        assert!(it.group.is_some() && it.text.is_some() && it.speaker.is_some());
    }
    assert_eq!(cm.items.iter().filter(|i| i.video.is_some()).count(), 209);
    assert!(cm.items.iter().filter(|i| !i.context.is_empty()).count() > 200);

    // The summary names every file.
    for f in FILES {
        assert!(stdout.contains(&format!("{f}: ")), "summary lacks {f}");
    }
}

#[test]
fn a_missing_data_dir_is_a_clear_error() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let run = Command::new("python3")
        .arg(repo.join("scripts/manifests.py"))
        .arg("--data")
        .arg(out.path().join("no-such-dir"))
        .arg("--out")
        .arg(out.path())
        .output()
        .expect("python3");
    assert!(!run.status.success());
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("not found"), "{err}");
    let run = Command::new("python3")
        .arg(repo.join("scripts/manifests.py"))
        .arg("--out")
        .arg(repo.join("target/manifests-in-repo"))
        .output()
        .expect("python3");
    assert!(!run.status.success(), "wrote into the repo");
}

/// No train/dev item has the normalised text of a test item (the official test is kept
/// intact and the other splits are cleaned of its texts).
fn assert_no_test_text_outside_test(m: &Manifest) {
    let test_text: HashSet<String> = in_split(m, "test")
        .iter()
        .map(|i| norm(i.text.as_deref().unwrap()))
        .collect();
    for it in m
        .items
        .iter()
        .filter(|i| i.split.as_deref() != Some("test"))
    {
        assert!(
            !test_text.contains(&norm(it.text.as_deref().unwrap())),
            "{} overlaps test",
            it.id
        );
    }
}
