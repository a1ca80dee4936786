//! Binary-classification figures as MuSAG reports them (precision, recall and F1 per
//! class, their macro averages, accuracy), with the random and majority baselines,
//! calibration error and inter-annotator agreement. Pure functions over labels and
//! scores, so they are tested on hand-worked examples.

use serde::Serialize;

/// Bins of the expected calibration error.
pub const ECE_BINS: usize = 10;

/// Counts of the 2x2 confusion matrix; class 1 = sarcastic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Confusion {
    /// Sarcastic, flagged.
    pub tp: usize,
    /// Not sarcastic, flagged.
    pub fp: usize,
    /// Sarcastic, not flagged.
    pub fn_: usize,
    /// Not sarcastic, not flagged.
    pub tn: usize,
}

impl Confusion {
    pub fn from_predictions(labels: &[bool], predicted: &[bool]) -> Self {
        assert_eq!(labels.len(), predicted.len(), "one prediction per label");
        let mut c = Self::default();
        for (&y, &p) in labels.iter().zip(predicted) {
            match (y, p) {
                (true, true) => c.tp += 1,
                (false, true) => c.fp += 1,
                (true, false) => c.fn_ += 1,
                (false, false) => c.tn += 1,
            }
        }
        c
    }

    pub fn n(&self) -> usize {
        self.tp + self.fp + self.fn_ + self.tn
    }
}

/// Precision, recall and F1 of one class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ClassScores {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Items of this class.
    pub support: usize,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

fn f1(p: f64, r: f64) -> f64 {
    if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    }
}

/// Everything one row of the table reports.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Scores {
    pub n: usize,
    pub n_sarcastic: usize,
    pub precision_macro: f64,
    pub recall_macro: f64,
    pub f1_macro: f64,
    pub accuracy: f64,
    pub sarcastic: ClassScores,
    pub not_sarcastic: ClassScores,
    pub confusion: Confusion,
}

impl Scores {
    /// An undefined precision or recall (no item predicted or present in a class) counts
    /// as 0, as scikit-learn's `zero_division=0` and the training report do.
    pub fn from_confusion(c: Confusion) -> Self {
        let p1 = ratio(c.tp, c.tp + c.fp);
        let r1 = ratio(c.tp, c.tp + c.fn_);
        let p0 = ratio(c.tn, c.tn + c.fn_);
        let r0 = ratio(c.tn, c.tn + c.fp);
        let sarcastic = ClassScores {
            precision: p1,
            recall: r1,
            f1: f1(p1, r1),
            support: c.tp + c.fn_,
        };
        let not_sarcastic = ClassScores {
            precision: p0,
            recall: r0,
            f1: f1(p0, r0),
            support: c.tn + c.fp,
        };
        Self {
            n: c.n(),
            n_sarcastic: sarcastic.support,
            precision_macro: (p0 + p1) / 2.0,
            recall_macro: (r0 + r1) / 2.0,
            f1_macro: (sarcastic.f1 + not_sarcastic.f1) / 2.0,
            accuracy: ratio(c.tp + c.tn, c.n()),
            sarcastic,
            not_sarcastic,
            confusion: c,
        }
    }

    pub fn of(labels: &[bool], predicted: &[bool]) -> Self {
        Self::from_confusion(Confusion::from_predictions(labels, predicted))
    }
}

/// The two baselines MuSAG prints beside every row.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Baselines {
    /// Expected figures of a fair coin: per class, precision = the class's share and
    /// recall = 0.5; F1 from those expectations. (The training report averages 2000
    /// seeded draws; this is their limit and needs no random numbers.)
    pub random_precision_macro: f64,
    pub random_recall_macro: f64,
    pub random_f1_macro: f64,
    pub random_accuracy: f64,
    /// Always predicting the larger class (ties: sarcastic).
    pub majority_f1_macro: f64,
    pub majority_accuracy: f64,
}

impl Baselines {
    pub fn of(labels: &[bool]) -> Self {
        let n = labels.len();
        let pos = labels.iter().filter(|&&y| y).count();
        let share1 = ratio(pos, n);
        let share0 = if n == 0 { 0.0 } else { 1.0 - share1 };
        let f1_1 = f1(share1, 0.5);
        let f1_0 = f1(share0, 0.5);
        let majority_class = 2 * pos >= n;
        let maj = Scores::of(labels, &vec![majority_class; n]);
        Self {
            random_precision_macro: (share0 + share1) / 2.0,
            random_recall_macro: 0.5,
            random_f1_macro: (f1_0 + f1_1) / 2.0,
            random_accuracy: if n == 0 { 0.0 } else { 0.5 },
            majority_f1_macro: maj.f1_macro,
            majority_accuracy: maj.accuracy,
        }
    }
}

/// One equal-width bin of predicted probability: how many items fell in it, the sum of
/// their probabilities and of their labels (1 = sarcastic).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReliabilityBin {
    pub items: usize,
    pub sum_p: f64,
    pub sum_y: f64,
}

/// Items binned by predicted probability into `bins` equal-width bins (empty ones
/// included, in order): what the ECE and the reliability diagram are both made of.
pub fn reliability_bins(labels: &[bool], p: &[f64], bins: usize) -> Vec<ReliabilityBin> {
    assert_eq!(labels.len(), p.len(), "one probability per label");
    assert!(bins > 0, "at least one bin");
    let mut out = vec![ReliabilityBin::default(); bins];
    for (&y, &pi) in labels.iter().zip(p) {
        let pi = pi.clamp(0.0, 1.0);
        // p = 1.0 belongs to the last bin, not a bin past the end.
        let b = &mut out[((pi * bins as f64) as usize).min(bins - 1)];
        b.items += 1;
        b.sum_p += pi;
        b.sum_y += if y { 1.0 } else { 0.0 };
    }
    out
}

/// Expected calibration error: items binned by predicted probability into `bins`
/// equal-width bins; the mean over bins of |accuracy of "sarcastic" - mean probability|,
/// weighted by the bin's share of items.
pub fn expected_calibration_error(labels: &[bool], p: &[f32], bins: usize) -> f64 {
    let p: Vec<f64> = p.iter().map(|&x| f64::from(x)).collect();
    let bins = reliability_bins(labels, &p, bins);
    if labels.is_empty() {
        return 0.0;
    }
    let n = labels.len() as f64;
    bins.iter()
        .filter(|b| b.items > 0)
        .map(|b| (b.sum_y - b.sum_p).abs() / n)
        .sum()
}

/// Area under the ROC curve: the probability that a random sarcastic item scores above
/// a random other one, ties counting half (the Mann-Whitney statistic). `None` when
/// either class is missing.
pub fn roc_auc(labels: &[bool], p: &[f32]) -> Option<f64> {
    assert_eq!(labels.len(), p.len(), "one probability per label");
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    // Mid-ranks over runs of equal scores.
    let mut rank = vec![0f64; p.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && p[order[j + 1]] == p[order[i]] {
            j += 1;
        }
        let mid = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            rank[k] = mid;
        }
        i = j + 1;
    }
    let n_pos = labels.iter().filter(|&&y| y).count() as f64;
    let n_neg = labels.len() as f64 - n_pos;
    if n_pos == 0.0 || n_neg == 0.0 {
        return None;
    }
    let rank_sum: f64 = labels
        .iter()
        .zip(&rank)
        .filter(|(&y, _)| y)
        .map(|(_, r)| r)
        .sum();
    Some((rank_sum - n_pos * (n_pos + 1.0) / 2.0) / (n_pos * n_neg))
}

/// The threshold that maximises macro-F1 on these items, and that macro-F1. Chosen on
/// the evaluated items themselves, so it is an optimistic bound, reported only to show
/// how much a recalibrated threshold could gain.
pub fn best_threshold(labels: &[bool], p: &[f32]) -> (f32, f64) {
    let mut candidates: Vec<f32> = p.to_vec();
    candidates.push(0.5);
    candidates.sort_by(f32::total_cmp);
    candidates.dedup();
    let mut best = (0.5f32, f64::MIN);
    for t in candidates {
        let pred: Vec<bool> = p.iter().map(|&x| x >= t).collect();
        let f = Scores::of(labels, &pred).f1_macro;
        if f > best.1 {
            best = (t, f);
        }
    }
    best
}

/// Cohen's kappa of two raters over the same items.
pub fn cohen_kappa(a: &[bool], b: &[bool]) -> Option<f64> {
    assert_eq!(a.len(), b.len(), "two raters, same items");
    let n = a.len() as f64;
    if a.is_empty() {
        return None;
    }
    let agree = a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / n;
    let pa = a.iter().filter(|&&x| x).count() as f64 / n;
    let pb = b.iter().filter(|&&x| x).count() as f64 / n;
    let chance = pa * pb + (1.0 - pa) * (1.0 - pb);
    if chance >= 1.0 {
        return None;
    }
    Some((agree - chance) / (1.0 - chance))
}

/// Fleiss' kappa for two categories: `votes[i]` = (raters of item i who said sarcastic,
/// raters of item i). Every item must have the same number of raters, at least 2.
pub fn fleiss_kappa(votes: &[(usize, usize)]) -> Option<f64> {
    let &(_, m) = votes.first()?;
    if m < 2 || votes.iter().any(|&(k, mi)| mi != m || k > m) {
        return None;
    }
    let n = votes.len() as f64;
    let m_f = m as f64;
    let mut p_bar = 0.0;
    let mut share1 = 0.0;
    for &(k, _) in votes {
        let k1 = k as f64;
        let k0 = m_f - k1;
        p_bar += (k1 * (k1 - 1.0) + k0 * (k0 - 1.0)) / (m_f * (m_f - 1.0));
        share1 += k1;
    }
    p_bar /= n;
    share1 /= n * m_f;
    let p_e = share1 * share1 + (1.0 - share1) * (1.0 - share1);
    if p_e >= 1.0 {
        return None;
    }
    Some((p_bar - p_e) / (1.0 - p_e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn scores_match_a_hand_worked_confusion() {
        // tp 3, fp 1, fn 2, tn 4.
        let y = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0].map(|v| v == 1);
        let p = [1, 1, 1, 0, 0, 1, 0, 0, 0, 0].map(|v| v == 1);
        let s = Scores::of(&y, &p);
        assert_eq!(
            s.confusion,
            Confusion {
                tp: 3,
                fp: 1,
                fn_: 2,
                tn: 4
            }
        );
        assert!(close(s.sarcastic.precision, 0.75));
        assert!(close(s.sarcastic.recall, 0.6));
        assert!(close(s.not_sarcastic.precision, 4.0 / 6.0));
        assert!(close(s.not_sarcastic.recall, 0.8));
        let f1_1 = 2.0 * 0.75 * 0.6 / 1.35;
        let f1_0 = 2.0 * (4.0 / 6.0) * 0.8 / (4.0 / 6.0 + 0.8);
        assert!(close(s.f1_macro, (f1_0 + f1_1) / 2.0));
        assert!(close(s.accuracy, 0.7));
    }

    #[test]
    fn a_class_never_predicted_scores_zero_not_nan() {
        let y = [true, false, false];
        let s = Scores::of(&y, &[false; 3]);
        assert_eq!(s.sarcastic.precision, 0.0);
        assert_eq!(s.sarcastic.f1, 0.0);
        assert!(s.f1_macro.is_finite());
    }

    #[test]
    fn baselines_of_the_house_clip_shares() {
        // 67 of 115 sarcastic: the training report's 2000 draws gave random macro-F1
        // 49.7 and majority 36.8.
        let y: Vec<bool> = (0..115).map(|i| i < 67).collect();
        let b = Baselines::of(&y);
        assert!((b.random_f1_macro - 0.497).abs() < 0.002, "{b:?}");
        assert!((b.majority_f1_macro - 0.368).abs() < 0.001, "{b:?}");
        assert!(close(b.majority_accuracy, 67.0 / 115.0));
    }

    #[test]
    fn calibration_error_of_perfect_and_overconfident_scores() {
        // Half sarcastic at p = 0.5: perfectly calibrated.
        let y = [true, false, true, false];
        assert!(close(expected_calibration_error(&y, &[0.5; 4], 10), 0.0));
        // Always p = 1.0, half right: error 0.5 (p = 1 falls in the last bin).
        assert!(close(expected_calibration_error(&y, &[1.0; 4], 10), 0.5));
    }

    #[test]
    fn best_threshold_separates_separable_scores() {
        let y = [false, false, true, true];
        let (t, f) = best_threshold(&y, &[0.1, 0.2, 0.3, 0.4]);
        assert!((t - 0.3).abs() < 1e-6);
        assert!(close(f, 1.0));
    }

    #[test]
    fn cohen_kappa_of_the_textbook_example() {
        // 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> kappa 0.4.
        let mut a = Vec::new();
        let mut b = Vec::new();
        for (x, y, k) in [
            (true, true, 20),
            (true, false, 5),
            (false, true, 10),
            (false, false, 15),
        ] {
            a.extend(std::iter::repeat_n(x, k));
            b.extend(std::iter::repeat_n(y, k));
        }
        assert!(close(cohen_kappa(&a, &b).unwrap(), 0.4));
    }

    #[test]
    fn fleiss_kappa_by_hand_and_its_limits() {
        // 4 items, 3 raters: votes 3, 0, 2, 1.
        // P_i = (6 + 0)/6, (0 + 6)/6, (2 + 0)/6, (0 + 2)/6 -> mean 2/3.
        // p1 = 6/12 = 0.5 -> P_e = 0.5 -> kappa = (2/3 - 1/2)/(1/2) = 1/3.
        let k = fleiss_kappa(&[(3, 3), (0, 3), (2, 3), (1, 3)]).unwrap();
        assert!(close(k, 1.0 / 3.0));
        // Full agreement on mixed items is 1.
        assert!(close(fleiss_kappa(&[(3, 3), (0, 3)]).unwrap(), 1.0));
        // Unequal rater counts or a single rater: undefined.
        assert_eq!(fleiss_kappa(&[(1, 2), (1, 3)]), None);
        assert_eq!(fleiss_kappa(&[(1, 1)]), None);
        // Two raters: Fleiss' and Cohen's kappa agree closely (Fleiss pools the
        // raters' marginals, so they are equal only when the marginals are).
        let a = [true, true, false, false, true, false];
        let b = [true, false, false, false, true, true];
        let votes: Vec<_> = a
            .iter()
            .zip(&b)
            .map(|(&x, &y)| (x as usize + y as usize, 2))
            .collect();
        let (f, c) = (fleiss_kappa(&votes).unwrap(), cohen_kappa(&a, &b).unwrap());
        assert!(close(f, c), "{f} vs {c}");
    }

    #[test]
    fn roc_auc_counts_ordered_pairs_and_half_ties() {
        let y = [true, true, false, false];
        assert_eq!(roc_auc(&y, &[0.9, 0.8, 0.2, 0.1]), Some(1.0));
        assert_eq!(roc_auc(&y, &[0.1, 0.2, 0.8, 0.9]), Some(0.0));
        assert_eq!(roc_auc(&y, &[0.5, 0.5, 0.5, 0.5]), Some(0.5));
        // 3 of the 4 (pos, neg) pairs ordered, one tied: 3.5 / 4.
        assert_eq!(roc_auc(&y, &[0.9, 0.4, 0.4, 0.1]), Some(0.875));
        assert_eq!(roc_auc(&[true, true], &[0.1, 0.2]), None);
    }
}
