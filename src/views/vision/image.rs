//! The only image operation the vision view needs: sample a rotated square of an RGB
//! frame into a model's input grid (bilinear, zero outside the frame). Letterboxing,
//! face crops and aligned crops are all this one affine map.

/// A square region of the frame, possibly rotated: centre and side in frame pixels,
/// rotation in radians (counter-clockwise as seen on screen, y pointing down).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Roi {
    pub cx: f32,
    pub cy: f32,
    pub width: f32,
    pub height: f32,
    pub angle_rad: f32,
}

impl Roi {
    /// Frame coordinates of a point given in the ROI's unit square ([0,1] x [0,1]).
    pub fn to_frame(&self, u: f32, v: f32) -> (f32, f32) {
        let (s, c) = self.angle_rad.sin_cos();
        let dx = (u - 0.5) * self.width;
        let dy = (v - 0.5) * self.height;
        (self.cx + c * dx - s * dy, self.cy + s * dx + c * dy)
    }
}

/// Sample `roi` of a packed RGB8 frame into an `out_w` x `out_h` grid. `put(x, y,
/// [r, g, b])` receives each output pixel with channels in [0, 255]; pixels outside the
/// frame are black, as the reference pipelines pad.
pub fn sample_roi(
    rgb: &[u8],
    width: u32,
    height: u32,
    roi: &Roi,
    out_w: usize,
    out_h: usize,
    mut put: impl FnMut(usize, usize, [f32; 3]),
) {
    let (w, h) = (width as i64, height as i64);
    // Shrinking by more than 2x: average n x n bilinear samples per output pixel, an
    // area filter like the reference pipelines' resize (plain bilinear would alias).
    let n = ((roi.width / out_w as f32)
        .max(roi.height / out_h as f32)
        .round() as usize)
        .clamp(1, 4);
    let inv = 1.0 / (n * n) as f32;
    // The affine map, hoisted: frame = origin + u * du + v * dv (u, v in [0, 1]).
    let (sin, cos) = roi.angle_rad.sin_cos();
    let du = (cos * roi.width, sin * roi.width);
    let dv = (-sin * roi.height, cos * roi.height);
    let (ox0, oy0) = roi.to_frame(0.0, 0.0);
    for oy in 0..out_h {
        for ox in 0..out_w {
            let mut c = [0.0f32; 3];
            for sy in 0..n {
                for sx in 0..n {
                    // Sub-pixel centres; with n = 1 pixel centres map to pixel centres.
                    let u = (ox as f32 + (sx as f32 + 0.5) / n as f32) / out_w as f32;
                    let v = (oy as f32 + (sy as f32 + 0.5) / n as f32) / out_h as f32;
                    let fx = ox0 + u * du.0 + v * dv.0 - 0.5;
                    let fy = oy0 + u * du.1 + v * dv.1 - 0.5;
                    let p = bilinear(rgb, w, h, fx, fy);
                    for k in 0..3 {
                        c[k] += p[k] * inv;
                    }
                }
            }
            put(ox, oy, c);
        }
    }
}

/// Bilinear sample at frame position (`fx`, `fy`) (pixel centres at integers), black
/// outside. Hot: ~150k calls per frame, so the common all-inside case reads the two
/// rows directly and `floor` is done with casts (baseline x86-64 has no SSE4.1 floor).
#[inline]
fn bilinear(rgb: &[u8], w: i64, h: i64, fx: f32, fy: f32) -> [f32; 3] {
    if !(fx > -1.0 && fy > -1.0 && fx < w as f32 && fy < h as f32) {
        return [0.0; 3];
    }
    // fx > -1, so truncation toward zero is floor except on (-1, 0).
    let x0 = if fx < 0.0 { -1 } else { fx as i64 };
    let y0 = if fy < 0.0 { -1 } else { fy as i64 };
    let (ax, ay) = (fx - x0 as f32, fy - y0 as f32);
    let px = |x: i64, y: i64| -> [f32; 3] {
        if x < 0 || y < 0 || x >= w || y >= h {
            return [0.0; 3];
        }
        let i = ((y * w + x) * 3) as usize;
        [rgb[i] as f32, rgb[i + 1] as f32, rgb[i + 2] as f32]
    };
    let (p00, p10, p01, p11) = if x0 >= 0 && y0 >= 0 && x0 + 1 < w && y0 + 1 < h {
        let i = ((y0 * w + x0) * 3) as usize;
        let j = i + (w * 3) as usize;
        let (a, b) = (&rgb[i..i + 6], &rgb[j..j + 6]);
        let f = |s: &[u8]| [s[0] as f32, s[1] as f32, s[2] as f32];
        (f(&a[..3]), f(&a[3..]), f(&b[..3]), f(&b[3..]))
    } else {
        (
            px(x0, y0),
            px(x0 + 1, y0),
            px(x0, y0 + 1),
            px(x0 + 1, y0 + 1),
        )
    };
    let mut c = [0.0f32; 3];
    for k in 0..3 {
        let top = p00[k] + (p10[k] - p00[k]) * ax;
        let bottom = p01[k] + (p11[k] - p01[k]) * ax;
        c[k] = top + (bottom - top) * ay;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(w: u32, h: u32) -> Vec<u8> {
        let mut v = Vec::new();
        for y in 0..h {
            for x in 0..w {
                v.extend_from_slice(&[x as u8, y as u8, 7]);
            }
        }
        v
    }

    #[test]
    fn identity_roi_reproduces_the_frame() {
        let f = frame(8, 6);
        let roi = Roi {
            cx: 4.0,
            cy: 3.0,
            width: 8.0,
            height: 6.0,
            angle_rad: 0.0,
        };
        sample_roi(&f, 8, 6, &roi, 8, 6, |x, y, c| {
            assert_eq!(c, [x as f32, y as f32, 7.0], "at {x},{y}");
        });
    }

    #[test]
    fn rotation_by_a_quarter_turn_maps_axes() {
        let roi = Roi {
            cx: 10.0,
            cy: 10.0,
            width: 4.0,
            height: 4.0,
            angle_rad: std::f32::consts::FRAC_PI_2,
        };
        // The ROI's +u axis points down the frame after a quarter turn.
        let (x, y) = roi.to_frame(1.0, 0.5);
        assert!(
            (x - 10.0).abs() < 1e-5 && (y - 12.0).abs() < 1e-5,
            "{x},{y}"
        );
    }

    #[test]
    fn shrinking_averages_instead_of_aliasing() {
        // A 1-pixel checkerboard shrunk 4x must come out flat grey, not black or white.
        let mut f = Vec::new();
        for y in 0..16u32 {
            for x in 0..16u32 {
                let v = if (x + y) % 2 == 0 { 255 } else { 0 };
                f.extend_from_slice(&[v, v, v]);
            }
        }
        let roi = Roi {
            cx: 8.0,
            cy: 8.0,
            width: 16.0,
            height: 16.0,
            angle_rad: 0.0,
        };
        sample_roi(&f, 16, 16, &roi, 4, 4, |_, _, c| {
            assert!((c[0] - 127.5).abs() < 1.0, "{c:?}")
        });
    }

    #[test]
    fn outside_the_frame_is_black() {
        let f = frame(4, 4);
        let roi = Roi {
            cx: 100.0,
            cy: 100.0,
            width: 4.0,
            height: 4.0,
            angle_rad: 0.0,
        };
        sample_roi(&f, 4, 4, &roi, 2, 2, |_, _, c| assert_eq!(c, [0.0; 3]));
    }
}
