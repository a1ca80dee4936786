//! What the vision view measures: per analysed frame a [`FaceObs`] (expression
//! distribution and landmark geometry), per utterance a fixed vector of functionals
//! over the frames it spans. The functionals are the video head's input; changing them
//! means a new [`VISION_FEATURE_VERSION`] and a retrained head.

use serde::Serialize;

/// Bump when the functionals change; heads trained on other features are refused.
pub const VISION_FEATURE_VERSION: &str = "vis-v1";

/// FER2013 classes, in the expression model's output order.
pub const EXPRESSIONS: [&str; 7] = [
    "angry", "disgust", "fear", "happy", "sad", "surprise", "neutral",
];

/// Landmark geometry, all in inter-ocular distances (IOD) measured in the upright
/// (de-rotated) face crop, so it does not depend on face size or head roll.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Geometry {
    /// Mouth corner to corner.
    pub mouth_width: f32,
    /// Mean height of the corners above the lip centre (positive: a smile's lift).
    pub corner_lift: f32,
    /// Inner lip gap.
    pub mouth_open: f32,
    /// Brow above eye centre, mean of both sides.
    pub brow_raise: f32,
    /// Eyelid gap, mean of both eyes.
    pub eye_open: f32,
    /// Nose tip left/right of the eye midpoint: a yaw proxy.
    pub yaw: f32,
    /// Nose tip below the eye midpoint: a pitch proxy.
    pub pitch: f32,
    /// Head roll from the eye line, radians.
    pub roll_rad: f32,
}

pub const GEOMETRY_NAMES: [&str; 8] = [
    "mouth_width",
    "corner_lift",
    "mouth_open",
    "brow_raise",
    "eye_open",
    "yaw",
    "pitch",
    "roll_rad",
];

impl Geometry {
    fn values(&self) -> [f32; 8] {
        [
            self.mouth_width,
            self.corner_lift,
            self.mouth_open,
            self.brow_raise,
            self.eye_open,
            self.yaw,
            self.pitch,
            self.roll_rad,
        ]
    }

    /// From 468 face-mesh points (x, y) in the upright crop; `roll_rad` from the ROI.
    pub fn from_mesh(p: &[(f32, f32)], roll_rad: f32) -> Option<Self> {
        if p.len() < 468 {
            return None;
        }
        let mid = |a: usize, b: usize| ((p[a].0 + p[b].0) / 2.0, (p[a].1 + p[b].1) / 2.0);
        let dist =
            |a: (f32, f32), b: (f32, f32)| ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt();
        // Eye centres from the corners (33/133 right eye, 362/263 left eye).
        let eye_r = mid(33, 133);
        let eye_l = mid(362, 263);
        let iod = dist(eye_r, eye_l);
        if iod.is_nan() || iod <= 1e-3 {
            return None;
        }
        let lip_centre_y = (p[13].1 + p[14].1) / 2.0;
        let corners_y = (p[61].1 + p[291].1) / 2.0;
        let brow_r = p[105].1;
        let brow_l = p[334].1;
        let eyes_mid = ((eye_r.0 + eye_l.0) / 2.0, (eye_r.1 + eye_l.1) / 2.0);
        Some(Self {
            mouth_width: dist(p[61], p[291]) / iod,
            corner_lift: (lip_centre_y - corners_y) / iod,
            mouth_open: (p[14].1 - p[13].1) / iod,
            brow_raise: ((eye_r.1 - brow_r) + (eye_l.1 - brow_l)) / 2.0 / iod,
            eye_open: ((p[145].1 - p[159].1) + (p[374].1 - p[386].1)) / 2.0 / iod,
            yaw: (p[1].0 - eyes_mid.0) / iod,
            pitch: (p[1].1 - eyes_mid.1) / iod,
            roll_rad,
        })
    }
}

/// One face seen in one frame.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FaceObs {
    pub detection_score: f32,
    /// Face centre in the frame, as fractions of width and height.
    pub centre: (f32, f32),
    /// Face box width as a fraction of the frame width.
    pub size: f32,
    pub expression: [f32; 7],
    /// `None` when the landmark model did not confirm the face.
    pub geometry: Option<Geometry>,
}

/// What the vision view saw in one analysed frame.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FrameObs {
    pub t_s: f64,
    pub face: Option<FaceObs>,
}

/// Names of the functionals, in vector order (written into head metadata).
pub fn functional_names() -> Vec<String> {
    let mut n = vec!["face_presence".to_string()];
    for e in EXPRESSIONS {
        n.push(format!("expr_{e}_mean"));
        n.push(format!("expr_{e}_std"));
    }
    for g in GEOMETRY_NAMES {
        n.push(format!("{g}_mean"));
        n.push(format!("{g}_std"));
    }
    n.push("expression_change_per_s".into());
    n.push("head_motion_per_s".into());
    n.push("pose_motion_per_s".into());
    n
}

pub const NUM_FUNCTIONALS: usize = 1 + 7 * 2 + 8 * 2 + 3;

fn mean_std(v: &[f32]) -> (f32, f32) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f32;
    let m = v.iter().sum::<f32>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f32>() / n;
    (m, var.sqrt())
}

/// Functionals over the frames of one utterance. `None` when no analysed frame had a
/// face: the video view then has nothing to say (it is null, never a guess).
pub fn functionals(frames: &[FrameObs]) -> Option<Vec<f32>> {
    let faces: Vec<(f64, &FaceObs)> = frames
        .iter()
        .filter_map(|f| f.face.as_ref().map(|o| (f.t_s, o)))
        .collect();
    if faces.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(NUM_FUNCTIONALS);
    out.push(faces.len() as f32 / frames.len() as f32);
    for k in 0..7 {
        let v: Vec<f32> = faces.iter().map(|(_, o)| o.expression[k]).collect();
        let (m, s) = mean_std(&v);
        out.extend([m, s]);
    }
    let geos: Vec<[f32; 8]> = faces
        .iter()
        .filter_map(|(_, o)| o.geometry.map(|g| g.values()))
        .collect();
    for k in 0..8 {
        let v: Vec<f32> = geos.iter().map(|g| g[k]).collect();
        let (m, s) = mean_std(&v);
        out.extend([m, s]);
    }
    // Rates of change between consecutive face frames, per second, so they do not
    // depend on the analysis frame rate.
    let (mut expr, mut head, mut pose, mut span) = (0.0f32, 0.0f32, 0.0f32, 0.0f64);
    for w in faces.windows(2) {
        let ((t0, a), (t1, b)) = (w[0], w[1]);
        span += t1 - t0;
        expr += (0..7)
            .map(|k| (a.expression[k] - b.expression[k]).abs())
            .sum::<f32>();
        let size = (a.size + b.size).max(1e-3) / 2.0;
        head +=
            ((a.centre.0 - b.centre.0).powi(2) + (a.centre.1 - b.centre.1).powi(2)).sqrt() / size;
        if let (Some(ga), Some(gb)) = (a.geometry, b.geometry) {
            pose += (ga.yaw - gb.yaw).abs()
                + (ga.pitch - gb.pitch).abs()
                + (ga.roll_rad - gb.roll_rad).abs();
        }
    }
    let per_s = |x: f32| if span > 0.0 { x / span as f32 } else { 0.0 };
    out.extend([per_s(expr), per_s(head), per_s(pose)]);
    debug_assert_eq!(out.len(), NUM_FUNCTIONALS);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn face(t_s: f64, happy: f32, x: f32) -> FrameObs {
        let mut expression = [0.0; 7];
        expression[3] = happy;
        expression[6] = 1.0 - happy;
        FrameObs {
            t_s,
            face: Some(FaceObs {
                detection_score: 0.9,
                centre: (x, 0.5),
                size: 0.2,
                expression,
                geometry: None,
            }),
        }
    }

    #[test]
    fn no_face_means_no_vector() {
        let frames = [FrameObs {
            t_s: 0.0,
            face: None,
        }; 3];
        assert_eq!(functionals(&frames), None);
        assert_eq!(functionals(&[]), None);
    }

    #[test]
    fn functionals_have_fixed_length_names_and_rates() {
        let frames = [
            face(0.0, 0.0, 0.5),
            FrameObs {
                t_s: 0.2,
                face: None,
            },
            face(0.4, 1.0, 0.6),
        ];
        let f = functionals(&frames).unwrap();
        assert_eq!(f.len(), NUM_FUNCTIONALS);
        assert_eq!(functional_names().len(), NUM_FUNCTIONALS);
        assert!((f[0] - 2.0 / 3.0).abs() < 1e-6, "presence");
        let names = functional_names();
        let at = |n: &str| f[names.iter().position(|x| x == n).unwrap()];
        assert!((at("expr_happy_mean") - 0.5).abs() < 1e-6);
        // happy 0->1 and neutral 1->0 over 0.4 s.
        assert!((at("expression_change_per_s") - 5.0).abs() < 1e-5);
        // Moved 0.1 of the frame width with a 0.2-wide face over 0.4 s.
        assert!((at("head_motion_per_s") - 1.25).abs() < 1e-5);
    }

    #[test]
    fn geometry_is_scale_free() {
        let mut p = vec![(0.0f32, 0.0f32); 468];
        for (i, xy) in [
            (33, (30.0, 40.0)),
            (133, (40.0, 40.0)),
            (362, (60.0, 40.0)),
            (263, (70.0, 40.0)),
            (61, (35.0, 80.0)),
            (291, (65.0, 80.0)),
            (13, (50.0, 82.0)),
            (14, (50.0, 86.0)),
            (105, (35.0, 30.0)),
            (334, (65.0, 30.0)),
            (159, (35.0, 38.0)),
            (145, (35.0, 42.0)),
            (386, (65.0, 38.0)),
            (374, (65.0, 42.0)),
            (1, (50.0, 60.0)),
        ] {
            p[i] = xy;
        }
        let g = Geometry::from_mesh(&p, 0.0).unwrap();
        let doubled: Vec<_> = p.iter().map(|(x, y)| (x * 2.0, y * 2.0)).collect();
        assert_eq!(Geometry::from_mesh(&doubled, 0.0).unwrap(), g);
        assert!((g.mouth_width - 1.0).abs() < 1e-6);
        assert!(
            (g.corner_lift - 4.0 / 30.0).abs() < 1e-6,
            "corners above lips"
        );
        assert!((g.brow_raise - 10.0 / 30.0).abs() < 1e-6);
        assert!(g.yaw.abs() < 1e-6);
    }
}
