//! Loading small ONNX models into tract, once, as shared runnables.

use std::path::Path;
use std::sync::Arc;

use thiserror::Error;
use tract_onnx::prelude::*;

use crate::common::error::BoxError;

pub type Runnable = Arc<TypedRunnableModel>;

#[derive(Debug, Error)]
#[error("{what}: cannot load ONNX model: {source}")]
pub struct OnnxError {
    pub what: String,
    #[source]
    pub source: BoxError,
}

/// Input facts: element type and shape, `None` for a symbolic (streaming) dimension.
pub struct InputSpec {
    pub dt: DatumType,
    pub shape: Vec<Option<usize>>,
}

impl InputSpec {
    pub fn f32(shape: &[Option<usize>]) -> Self {
        Self {
            dt: f32::datum_type(),
            shape: shape.to_vec(),
        }
    }
    pub fn i64(shape: &[Option<usize>]) -> Self {
        Self {
            dt: i64::datum_type(),
            shape: shape.to_vec(),
        }
    }
}

pub fn load_path(path: &Path, inputs: &[InputSpec]) -> Result<Runnable, OnnxError> {
    let what = path.display().to_string();
    // By kind first: a FIFO would block the open, a device would be read without end.
    let mut f = crate::common::file_kind::regular_file(path)
        .and_then(|_| std::fs::File::open(path))
        .map_err(|e| OnnxError {
            what: what.clone(),
            source: e.into(),
        })?;
    load_reader(&what, &mut f, inputs)
}

pub fn load_bytes(what: &str, bytes: &[u8], inputs: &[InputSpec]) -> Result<Runnable, OnnxError> {
    load_reader(what, &mut std::io::Cursor::new(bytes), inputs)
}

fn load_reader(
    what: &str,
    reader: &mut dyn std::io::Read,
    inputs: &[InputSpec],
) -> Result<Runnable, OnnxError> {
    let proto = tract_onnx::onnx()
        .proto_model_for_read(reader)
        .map_err(|e| OnnxError {
            what: what.to_string(),
            source: format!("{e:#}").into(),
        })?;
    load_proto(what, &proto, inputs)
}

/// A model already decoded (and checked: `crate::views::heads` checks a head's graph first).
pub fn load_proto(
    what: &str,
    proto: &tract_onnx::pb::ModelProto,
    inputs: &[InputSpec],
) -> Result<Runnable, OnnxError> {
    let err = |e: TractError| OnnxError {
        what: what.to_string(),
        source: format!("{e:#}").into(),
    };
    let mut model = tract_onnx::onnx()
        .model_for_proto_model(proto)
        .map_err(err)?;
    let symbols = model.symbols.clone();
    for (i, spec) in inputs.iter().enumerate() {
        let dims: TVec<TDim> = spec
            .shape
            .iter()
            .enumerate()
            .map(|(k, d)| match d {
                Some(n) => TDim::from(*n as i64),
                None => symbols.sym(&format!("S{i}_{k}")).into(),
            })
            .collect();
        let fact = InferenceFact::dt_shape(spec.dt, dims);
        model = model.with_input_fact(i, fact).map_err(err)?;
    }
    model
        .into_optimized()
        .and_then(|m| m.into_runnable())
        .map_err(err)
}

/// Read a whole f32 output as a flat vector.
pub fn output_f32(v: &TValue) -> TractResult<Vec<f32>> {
    let view = v.to_plain_array_view::<f32>()?;
    Ok(view.iter().copied().collect())
}
