//! What a head's ONNX graph may be, checked on the decoded protobuf before tract builds
//! anything from it.
//!
//! Why here and not in tract: tract takes a graph's word for its sizes. Given
//! `input_dim` 7 for a graph whose weights are 512 x 1, it loaded the head and failed
//! at the first utterance; given a tensor declared with 6e9 elements it spent 100 s and
//! 6.7 GB on `validate`. Heads are logistic regressions and small networks, so the check
//! is strict and cheap: a short list of operators, every tensor's shape worked out from
//! the input `[1, input_dim]` and the initializers, and every size bounded. A graph
//! outside that is refused with the node and the reason.

use std::collections::HashMap;

use tract_onnx::pb;
use tract_onnx::pb::tensor_shape_proto::dimension::Value as DimValue;

/// Elements of any one tensor: 4 Mi (16 MB of f32). The largest head today holds a
/// 512 x 10 weight matrix.
pub const MAX_TENSOR_ELEMENTS: u64 = 1 << 22;
/// Elements of every tensor of the graph together.
pub const MAX_GRAPH_ELEMENTS: u64 = 1 << 24;
/// Nodes of a head's graph (today's have 7 to 20).
pub const MAX_NODES: usize = 1000;

type Shape = Vec<u64>;

/// Operators a head may use. Each has a shape rule below; operators that make tensors
/// from runtime values (ConstantOfShape, Expand, Tile, Range, Resize, loops) are not here.
const UNARY: &[&str] = &[
    "Sigmoid",
    "Relu",
    "Tanh",
    "Exp",
    "Log",
    "Neg",
    "Abs",
    "Sqrt",
    "Identity",
    "Softmax",
    "LogSoftmax",
    "Reciprocal",
    "Erf",
    "Clip",
];
const BROADCAST: &[&str] = &["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Pow"];

fn elements(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

fn show(shape: &[u64]) -> String {
    format!("{shape:?}")
}

/// NumPy broadcasting of two shapes.
fn broadcast(a: &[u64], b: &[u64]) -> Option<Shape> {
    let n = a.len().max(b.len());
    let at = |s: &[u64], i: usize| {
        let pad = n - s.len();
        if i < pad {
            1
        } else {
            s[i - pad]
        }
    };
    (0..n)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

fn attr_i(node: &pb::NodeProto, name: &str, default: i64) -> i64 {
    node.attribute
        .iter()
        .find(|a| a.name == name)
        .map_or(default, |a| a.i)
}

fn tensor_shape(t: &pb::TensorProto, what: &str) -> Result<Shape, String> {
    if t.data_location == Some(1) || !t.external_data.is_empty() {
        return Err(format!(
            "{what} keeps its data in an external file; a head is one self-contained file"
        ));
    }
    let shape: Option<Shape> = t.dims.iter().map(|&d| u64::try_from(d).ok()).collect();
    let shape = shape.ok_or_else(|| format!("{what} has a negative dimension {:?}", t.dims))?;
    bounded(&shape, what)?;
    Ok(shape)
}

fn bounded(shape: &[u64], what: &str) -> Result<u64, String> {
    match elements(shape) {
        Some(n) if n <= MAX_TENSOR_ELEMENTS => Ok(n),
        _ => Err(format!(
            "{what} is {} ({} elements); a head's tensors hold at most {MAX_TENSOR_ELEMENTS}",
            show(shape),
            elements(shape).map_or_else(|| "more than 2^64".to_string(), |n| n.to_string())
        )),
    }
}

/// The graph's one input, checked against the metadata's `input_dim`: rank 2, the
/// feature dimension `input_dim` (or symbolic), the batch 1 (or symbolic).
fn input_shape(g: &pb::GraphProto, input_dim: usize) -> Result<(String, Shape), String> {
    let initialized: Vec<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    let inputs: Vec<&pb::ValueInfoProto> = g
        .input
        .iter()
        .filter(|i| !initialized.contains(&i.name.as_str()))
        .collect();
    let [input] = inputs.as_slice() else {
        return Err(format!(
            "the graph has {} inputs; a head has exactly one (the feature vector)",
            inputs.len()
        ));
    };
    let dims: Vec<Option<i64>> = match input.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(pb::type_proto::Value::TensorType(t)) => t
            .shape
            .as_ref()
            .map(|s| {
                s.dim
                    .iter()
                    .map(|d| match d.value {
                        Some(DimValue::DimValue(v)) => Some(v),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default(),
        _ => return Err(format!("input `{}` is not a tensor", input.name)),
    };
    let declared = || {
        let d: Vec<String> = dims
            .iter()
            .map(|d| d.map_or_else(|| "?".to_string(), |v| v.to_string()))
            .collect();
        format!("[{}]", d.join(", "))
    };
    let ok = dims.len() == 2
        && dims[0].is_none_or(|b| b == 1)
        && dims[1].is_none_or(|f| u64::try_from(f).ok() == Some(input_dim as u64));
    if !ok {
        return Err(format!(
            "the graph's input `{}` is {} but the metadata says input_dim {input_dim} \
             (a head takes [1, input_dim]): the metadata does not belong to this graph",
            input.name,
            declared()
        ));
    }
    Ok((input.name.clone(), vec![1, input_dim as u64]))
}

/// Every tensor's shape from the input `[1, input_dim]` through every node, each
/// bounded; `Err` names what is wrong. `Ok` means tract will see sizes no larger than
/// these.
pub(crate) fn check(proto: &pb::ModelProto, input_dim: usize) -> Result<(), String> {
    let g = proto.graph.as_ref().ok_or("the file holds no graph")?;
    if !proto.functions.is_empty() || !proto.training_info.is_empty() {
        return Err("the model defines functions or training steps; a head has neither".into());
    }
    if !g.sparse_initializer.is_empty() {
        return Err("the graph has sparse initializers; a head has none".into());
    }
    if g.node.len() > MAX_NODES {
        return Err(format!(
            "the graph has {} nodes; a head has at most {MAX_NODES}",
            g.node.len()
        ));
    }
    let mut shapes: HashMap<String, Shape> = HashMap::new();
    let mut total = 0u64;
    let mut add = |shapes: &mut HashMap<String, Shape>, name: &str, shape: Shape, what: &str| {
        let n = bounded(&shape, what)?;
        total = total.saturating_add(n);
        if total > MAX_GRAPH_ELEMENTS {
            return Err(format!(
                "the graph's tensors hold more than {MAX_GRAPH_ELEMENTS} elements together"
            ));
        }
        shapes.insert(name.to_string(), shape);
        Ok::<(), String>(())
    };
    for t in &g.initializer {
        let what = format!("initializer `{}`", t.name);
        let shape = tensor_shape(t, &what)?;
        add(&mut shapes, &t.name, shape, &what)?;
    }
    let (input, shape) = input_shape(g, input_dim)?;
    add(&mut shapes, &input, shape, "the input")?;
    for (k, node) in g.node.iter().enumerate() {
        let what = format!("node {k} ({} `{}`)", node.op_type, node.name);
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            return Err(format!(
                "{what} is from operator set `{}`; heads use standard ONNX operators",
                node.domain
            ));
        }
        let ins: Vec<&Shape> = node
            .input
            .iter()
            .filter(|n| !n.is_empty())
            .map(|n| {
                shapes.get(n).ok_or_else(|| {
                    format!("{what} reads `{n}`, which no input, initializer or earlier node makes")
                })
            })
            .collect::<Result<_, _>>()?;
        let out = output_shape(node, &ins, &what, input_dim)?;
        for name in node.output.iter().filter(|n| !n.is_empty()) {
            add(
                &mut shapes,
                name,
                out.clone(),
                &format!("{what}'s output `{name}`"),
            )?;
        }
    }
    for o in &g.output {
        if !shapes.contains_key(&o.name) {
            return Err(format!(
                "the graph's output `{}` is made by no node",
                o.name
            ));
        }
    }
    if g.output.is_empty() {
        return Err("the graph has no output".into());
    }
    Ok(())
}

/// The shape of a node's output from its inputs' shapes; `Err` for an operator a head
/// may not use, or inputs it cannot take.
fn output_shape(
    node: &pb::NodeProto,
    ins: &[&Shape],
    what: &str,
    input_dim: usize,
) -> Result<Shape, String> {
    let op = node.op_type.as_str();
    Ok(if op == "Constant" {
        let t = node
            .attribute
            .iter()
            .find(|a| a.name == "value")
            .and_then(|a| a.t.as_ref())
            .ok_or_else(|| format!("{what} is a Constant without a tensor `value`"))?;
        tensor_shape(t, what)?
    } else if UNARY.contains(&op) {
        ins.first()
            .map(|s| s.to_vec())
            .ok_or_else(|| format!("{what} has no input"))?
    } else if BROADCAST.contains(&op) {
        let (first, rest) = ins
            .split_first()
            .ok_or_else(|| format!("{what} has no input"))?;
        rest.iter()
            .try_fold(first.to_vec(), |acc, s| broadcast(&acc, s))
            .ok_or_else(|| {
                let all: Vec<String> = ins.iter().map(|s| show(s)).collect();
                format!("{what}: shapes {} do not broadcast", all.join(" and "))
            })?
    } else if op == "MatMul" || op == "Gemm" {
        matmul_shape(node, ins, what, input_dim)?
    } else {
        return Err(format!(
            "{what}: operator {op} is not one a head may use (allowed: MatMul, Gemm, \
             Constant, {}, {})",
            BROADCAST.join(", "),
            UNARY.join(", ")
        ));
    })
}

/// `MatMul` or `Gemm` (with `transA`/`transB` and `C`) of 2-D tensors.
fn matmul_shape(
    node: &pb::NodeProto,
    ins: &[&Shape],
    what: &str,
    input_dim: usize,
) -> Result<Shape, String> {
    let op = node.op_type.as_str();
    let (a, b) = match ins {
        [a, b, ..] if a.len() == 2 && b.len() == 2 => (a, b),
        _ => return Err(format!("{what}: a head multiplies 2-D tensors only")),
    };
    let t = |s: &Shape, flag: &str| {
        if op == "Gemm" && attr_i(node, flag, 0) != 0 {
            [s[1], s[0]]
        } else {
            [s[0], s[1]]
        }
    };
    let ([m, ka], [kb, n]) = (t(a, "transA"), t(b, "transB"));
    if ka != kb {
        return Err(format!(
            "{what} multiplies {} by {}: the inner sizes differ ({ka} vs {kb}); \
             does the metadata's input_dim ({input_dim}) belong to this graph?",
            show(a),
            show(b)
        ));
    }
    let out = vec![m, n];
    if let (true, Some(c)) = (op == "Gemm", ins.get(2)) {
        broadcast(&out, c)
            .filter(|s| *s == out)
            .ok_or_else(|| format!("{what}: C {} does not broadcast to {}", show(c), show(&out)))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tract_onnx::prelude::Framework;

    fn head(name: &str) -> pb::ModelProto {
        let p = std::path::Path::new(super::super::DEFAULT_HEADS_DIR).join(format!("{name}.onnx"));
        let bytes = std::fs::read(p).unwrap();
        tract_onnx::onnx()
            .proto_model_for_read(&mut bytes.as_slice())
            .unwrap()
    }

    #[test]
    fn every_shipped_head_passes_with_its_own_input_dim_only() {
        for (name, dim) in [
            ("text_head", 512),
            ("audio_head", 73),
            ("video_head", 34),
            ("fusion_head", 5),
            ("extras_head", 512),
        ] {
            let p = head(name);
            check(&p, dim).unwrap_or_else(|e| panic!("{name}: {e}"));
            let e = check(&p, 7).unwrap_err();
            assert!(e.contains("input_dim 7"), "{name}: {e}");
        }
    }

    #[test]
    fn a_graph_that_hides_its_input_size_is_caught_at_the_multiplication() {
        let mut p = head("text_head");
        let g = p.graph.as_mut().unwrap();
        for i in &mut g.input {
            if let Some(pb::type_proto::Value::TensorType(t)) =
                i.r#type.as_mut().and_then(|t| t.value.as_mut())
            {
                for d in &mut t.shape.as_mut().unwrap().dim {
                    d.value = Some(DimValue::DimParam("n".into()));
                }
            }
        }
        // Declared symbolic: the mean/scale initializers [1, 512] no longer broadcast
        // with [1, 7], or the weights [512, 1] no longer fit.
        let e = check(&p, 7).unwrap_err();
        assert!(e.contains("broadcast") || e.contains("inner sizes"), "{e}");
        check(&p, 512).unwrap();
    }

    #[test]
    fn absurd_sizes_and_foreign_operators_are_refused_before_tract() {
        let mut p = head("fusion_head");
        p.graph.as_mut().unwrap().initializer[0].dims = vec![6_000_000_000];
        let e = check(&p, 5).unwrap_err();
        assert!(e.contains("6000000000 elements"), "{e}");
        let mut p = head("fusion_head");
        p.graph.as_mut().unwrap().initializer[0].dims = vec![i64::MAX, i64::MAX];
        assert!(check(&p, 5).unwrap_err().contains("more than 2^64"));
        let mut p = head("fusion_head");
        p.graph.as_mut().unwrap().node[0].op_type = "ConstantOfShape".into();
        let e = check(&p, 5).unwrap_err();
        assert!(
            e.contains("ConstantOfShape is not one a head may use"),
            "{e}"
        );
        assert_eq!(broadcast(&[1, 5], &[5]), Some(vec![1, 5]));
        assert_eq!(broadcast(&[2, 5], &[3, 1]), None);
    }
}
