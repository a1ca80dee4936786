//! The served fused score only moves with the views the fusion head weighs
//! (`weighted_views`, chosen on the cross-corpus protocol); the others are reported but
//! never change `p_sarcastic`, and without a weighted view there is no score.

use sarcasmd::views::fusion::{Fusion, FusionConfig, WeightedViews};

fn shipped() -> Fusion {
    Fusion::load(&FusionConfig::default(), true, true).expect("the heads in models/heads load")
}

#[test]
fn unweighted_views_never_move_the_served_score() {
    let mut f = shipped();
    f.weighted = WeightedViews {
        text: true,
        audio: false,
        video: false,
    };
    let base = f.fuse(Some(0.7), Some(0.5), None).unwrap().unwrap();
    for (a, v) in [
        (Some(0.01), None),
        (Some(0.99), Some(0.99)),
        (None, Some(0.01)),
    ] {
        assert_eq!(f.fuse(Some(0.7), a, v).unwrap(), Some(base));
    }
    // Monotone in the weighted view.
    assert!(f.fuse(Some(0.9), Some(0.5), None).unwrap().unwrap() > base);
    // No weighted view: no score, however confident the others are.
    assert_eq!(f.fuse(None, Some(0.99), Some(0.99)).unwrap(), None);
    // The combinations eval reports go through the head with every view given, and a
    // single view passes through as it is.
    assert_eq!(f.fuse_views(None, Some(0.3), None).unwrap(), Some(0.3));
    assert!(f.fuse_views(Some(0.7), Some(0.99), None).unwrap().is_some());
}

#[test]
fn the_shipped_fusion_head_names_its_weighted_views() {
    let f = shipped();
    assert!(
        f.fused.meta.weighted_views.is_some(),
        "models/heads/fusion_head.json lacks weighted_views: retrain it with models/recipe/cross_corpus.sh --ship"
    );
    assert!(
        f.weighted.text,
        "the text view carries the signal across shows"
    );
}

#[test]
fn a_room_prior_moves_the_threshold_the_events_use() {
    let cfg = FusionConfig {
        prior: 0.2,
        ..FusionConfig::default()
    };
    let f = Fusion::load(&cfg, true, false).unwrap();
    assert!((f.threshold - 0.8).abs() < 1e-5, "{}", f.threshold);
}

#[test]
fn a_named_operating_point_flags_where_its_text_threshold_lies() {
    for name in ["meeting", "meeting_strict"] {
        let cfg = FusionConfig {
            operating_point: Some(name.into()),
            ..FusionConfig::default()
        };
        let f = Fusion::load(&cfg, true, false)
            .unwrap_or_else(|e| panic!("the shipped text head has no usable '{name}': {e}"));
        let (got, op) = f.operating_point.clone().unwrap();
        assert_eq!(got, name);
        let t = op.text_threshold;
        assert!(t > 0.5 && t < 1.0, "{name}: {t}");
        // A line scored at the text threshold is flagged, one just below it is not.
        let at = f.fuse(Some(t), None, None).unwrap().unwrap();
        let below = f.fuse(Some(t - 0.002), None, None).unwrap().unwrap();
        assert!(
            at >= f.threshold && below < f.threshold,
            "{name}: {below} {at} {}",
            f.threshold
        );
    }
}

#[test]
fn an_unknown_operating_point_is_refused_with_the_names_there_are() {
    let cfg = FusionConfig {
        operating_point: Some("boardroom".into()),
        ..FusionConfig::default()
    };
    let err = Fusion::load(&cfg, true, false)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("boardroom") && err.contains("meeting"),
        "{err}"
    );
    // It measures the text view: without it there is nothing to hold it to.
    let cfg = FusionConfig {
        operating_point: Some("meeting".into()),
        ..FusionConfig::default()
    };
    assert!(Fusion::load(&cfg, false, false).is_err());
}
