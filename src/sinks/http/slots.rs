//! Connection slots: at most `http.max_connections` connections are open at once. When
//! every slot is taken, a new connection takes the slot of the *oldest connection that
//! serves nothing* (no response in flight: an idle keep-alive, or a client that has not
//! finished its request head), which is closed; only when every open connection is
//! serving (SSE clients, a caption file being sent) is the new one refused. A client that
//! opens idle connections therefore cannot lock the overlay and `/metrics` out: it loses
//! its own connections instead (each closure counted).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use tokio::sync::Notify;

use crate::common::lock::LockOrRecover;

/// What happened to a new connection.
pub(super) enum Admit {
    /// A free slot.
    Free(Slot),
    /// The slot of an idle connection, which was told to close.
    TookIdle(Slot),
    /// Every open connection is serving a response: refused.
    Refused,
}

pub(super) struct Slots {
    max: usize,
    /// Open connections by age (ids only grow).
    open: Mutex<BTreeMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
    /// Signalled whenever a connection ends, for the shutdown wait.
    ended: Notify,
}

/// One open connection's state.
#[derive(Default)]
pub(super) struct Conn {
    in_flight: AtomicUsize,
    close: Notify,
}

/// A connection's hold on its slot; given back when the connection ends.
pub(super) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    pub(super) conn: Arc<Conn>,
}

impl Slots {
    pub(super) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            open: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(0),
            ended: Notify::new(),
        })
    }

    pub(super) fn admit(self: &Arc<Self>) -> Admit {
        let mut open = self.open.lock_or_recover();
        let mut took_idle = false;
        if open.len() >= self.max {
            let idle = open
                .iter()
                .find(|(_, c)| c.in_flight.load(Ordering::SeqCst) == 0)
                .map(|(id, _)| *id);
            let Some(id) = idle else {
                return Admit::Refused;
            };
            if let Some(c) = open.remove(&id) {
                // notify_one keeps the wake-up if the connection is not waiting yet.
                c.close.notify_one();
            }
            took_idle = true;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn::default());
        open.insert(id, conn.clone());
        let slot = Slot {
            slots: self.clone(),
            id,
            conn,
        };
        if took_idle {
            Admit::TookIdle(slot)
        } else {
            Admit::Free(slot)
        }
    }

    pub(super) fn open(&self) -> usize {
        self.open.lock_or_recover().len()
    }

    /// Resolves once every connection has ended.
    pub(super) async fn all_ended(&self) {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.open() == 0 {
                return;
            }
            ended.await;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.open.lock_or_recover().remove(&self.id);
        self.slots.ended.notify_waiters();
    }
}

impl Conn {
    /// Resolves when another connection took this one's slot.
    pub(super) async fn closed(&self) {
        self.close.notified().await
    }

    /// Marks a response in flight until the returned guard (held by the response body)
    /// is dropped: hyper drops the body once it is sent, or when the client leaves.
    pub(super) fn serving(self: &Arc<Self>) -> Serving {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Serving(self.clone())
    }
}

pub(super) struct Serving(Arc<Conn>);

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body that keeps its connection marked as serving while it is sent.
pub(super) struct ServingBody {
    pub(super) inner: Body,
    pub(super) _serving: Serving,
}

impl http_body::Body for ServingBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_gives_the_oldest_idle_slot_away_and_refuses_when_all_serve() {
        let slots = Slots::new(2);
        let Admit::Free(a) = slots.admit() else {
            panic!("first slot")
        };
        let Admit::Free(b) = slots.admit() else {
            panic!("second slot")
        };
        // `a` serves a response; `b` is idle: a third connection takes b's slot.
        let serving_a = a.conn.serving();
        let Admit::TookIdle(c) = slots.admit() else {
            panic!("the idle slot was not taken")
        };
        assert_eq!(slots.open(), 2);
        // b was told to close (the notification waits for it).
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(1), b.conn.closed())
                .await
                .expect("b told to close")
        });
        // Both remaining connections serve: the next one is refused.
        let serving_c = c.conn.serving();
        assert!(matches!(slots.admit(), Admit::Refused));
        drop(serving_a);
        assert!(matches!(slots.admit(), Admit::TookIdle(_)));
        drop((b, serving_c));
    }
}
