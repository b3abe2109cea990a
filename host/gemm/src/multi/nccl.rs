//! The calls of a [`MultiGemm`] that move data between devices, through
//! NCCL (cudarc's `nccl`; feature `nccl`): a K split reduced on the
//! devices ([`MultiGemm::gemm_reduced`], the plan: [`Reduction`]) and an
//! all-gather of A overlapped with the product ([`MultiGemm::gather_gemm`],
//! the plan: [`Gather`]).
//!
//! Each device has a second stream, its communicator's: the data moves
//! there, and the GEMMs and sums run on the handle's stream, each stream
//! waiting for the other where the plan needs the other's results. With
//! one process driving every device, each collective is one NCCL group
//! over all the communicators (what NCCL asks of a single thread driving
//! several GPUs). NCCL refuses two ranks of one communicator on one GPU,
//! so [`MultiGemm::with_nccl`] wants one stream per GPU. cudarc's
//! communicators are neither `Send` nor `Sync`, so a `MultiGemm` built
//! with this feature is neither: drive it from the thread that made it.

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop};
use cudarc::nccl::{Comm, NcclType, group_end, group_start};

use super::{Gather, MultiGemm, Part, Reduction, Split, split};
use crate::blas::{Choice, GemmConfig, GemmElement, GemmError, storage_of};
use crate::error::HostError;

/// One communicator per device, over second streams of the handles'
/// GPUs, and the reduction's scratch.
pub(super) struct Comms {
    comms: Vec<Comm>,
    /// Set when an NCCL call failed inside a group: the other ranks' parts
    /// of that group may wait for ever for the missing one, so the
    /// communicators take no more work.
    broken: Cell<bool>,
    /// Each device's plane and slots for [`MultiGemm::gemm_reduced`],
    /// kept between calls and only grown (nothing allocated per call
    /// once they are large enough).
    scratch: RefCell<Vec<Scratch>>,
}

/// A device's scratch for the reduction of a K split.
#[derive(Default)]
struct Scratch {
    plane: Option<CudaSlice<f32>>,
    slots: Option<CudaSlice<f32>>,
}

impl Drop for Comms {
    /// Waits for the communicators' streams before cudarc aborts the
    /// communicators (`ncclCommAbort`, which would cancel what is still
    /// running), unless a group failed.
    fn drop(&mut self) {
        // Not after a failed group: what waits for a missing rank would
        // wait for ever, and the abort is what ends it.
        if self.broken.get() {
            return;
        }
        for c in &self.comms {
            let _ = c.stream().synchronize();
        }
    }
}

/// Joins every handle's stream to its communicator's when dropped, on
/// every way out of a call: what a handle's stream runs later (the
/// caller's work, the freeing of buffers) waits for what NCCL was given,
/// including the work of a group whose buffers' cudarc events were
/// recorded before NCCL enqueued it.
pub(super) struct Joined<'a> {
    pub(super) multi: &'a MultiGemm,
    pub(super) comms: &'a [Comm],
}

impl Drop for Joined<'_> {
    fn drop(&mut self) {
        for d in 0..self.comms.len() {
            let _ = self.multi.wait(self.comms, d, false);
        }
    }
}

/// A driver failure on device `d`, doing `doing`.
pub(super) fn cuda(
    d: usize,
    doing: &str,
) -> impl FnOnce(cudarc::driver::DriverError) -> GemmError + '_ {
    move |source| {
        let doing = doing.to_string();
        GemmError::from(HostError::Cuda { doing, source }).on_device(d)
    }
}

/// An NCCL failure, doing `doing`.
pub(super) fn nccl(doing: &str) -> impl FnOnce(cudarc::nccl::result::NcclError) -> GemmError + '_ {
    move |e| GemmError::Nccl {
        doing: doing.to_string(),
        error: format!("{e:?}"),
    }
}

/// Runs `calls` as one NCCL group (every communicator's part of a
/// collective, or a set of sends and receives): the group is closed even
/// when a call fails.
fn grouped(doing: &str, calls: impl FnOnce() -> Result<(), GemmError>) -> Result<(), GemmError> {
    group_start().map_err(nccl(doing))?;
    let called = calls();
    let ended = group_end().map_err(nccl(doing));
    called.and(ended.map(|_| ()))
}

impl MultiGemm {
    /// [`grouped`] on this handle's communicators: a failure marks them
    /// broken ([`Comms::broken`]).
    pub(super) fn group(
        &self,
        doing: &str,
        calls: impl FnOnce() -> Result<(), GemmError>,
    ) -> Result<(), GemmError> {
        let done = grouped(doing, calls);
        if done.is_err()
            && let Some(c) = &self.comms
        {
            c.broken.set(true);
        }
        done
    }
}

/// A stretch of a device buffer by address, with no event of its own:
/// the all-gather's chunks, whose order the streams' waits keep (cudarc's
/// per-buffer events would make each broadcast wait for the GEMM that
/// read the buffer before it, and each GEMM for the last broadcast).
pub(super) struct Region<'a, T> {
    ptr: u64,
    len: usize,
    stream: &'a Arc<CudaStream>,
    _t: PhantomData<T>,
}

impl<'a, T> Region<'a, T> {
    /// Values `range` of the buffer at `base` (`len` values).
    ///
    /// # Safety
    /// `base` holds at least `range.end` values of `T`, alive and not
    /// moved while the region is used, and whoever uses the region
    /// orders its reads and writes with the buffer's other users.
    pub(super) unsafe fn of(base: u64, range: Range<usize>, stream: &'a Arc<CudaStream>) -> Self {
        Self {
            ptr: base + (range.start * size_of::<T>()) as u64,
            len: range.len(),
            stream,
            _t: PhantomData,
        }
    }
}

impl<T> DeviceSlice<T> for Region<'_, T> {
    fn len(&self) -> usize {
        self.len
    }
    fn stream(&self) -> &Arc<CudaStream> {
        self.stream
    }
}

impl<T> DevicePtr<T> for Region<'_, T> {
    fn device_ptr<'a>(&'a self, _: &'a CudaStream) -> (u64, SyncOnDrop<'a>) {
        (self.ptr, SyncOnDrop::Record(None))
    }
}

impl<T> DevicePtrMut<T> for Region<'_, T> {
    fn device_ptr_mut<'a>(&'a mut self, _: &'a CudaStream) -> (u64, SyncOnDrop<'a>) {
        (self.ptr, SyncOnDrop::Record(None))
    }
}

impl MultiGemm {
    /// [`MultiGemm::new`] with an NCCL communicator per device, on a
    /// second stream of each stream's GPU: what [`MultiGemm::gemm_reduced`]
    /// and [`MultiGemm::gather_gemm`] need. One stream per GPU (NCCL
    /// refuses two ranks on one GPU); a single GPU makes a one-rank
    /// communicator, which runs the same steps.
    pub fn with_nccl(streams: Vec<Arc<CudaStream>>) -> Result<Self, GemmError> {
        let ordinals: Vec<usize> = streams.iter().map(|s| s.context().ordinal()).collect();
        for (second, ordinal) in ordinals.iter().enumerate() {
            if let Some(first) = ordinals[..second].iter().position(|o| o == ordinal) {
                return Err(GemmError::SameGpu {
                    first,
                    second,
                    ordinal: *ordinal,
                });
            }
        }
        let mut multi = Self::new(streams)?;
        // SAFETY: only asks whether the library loads.
        if !unsafe { cudarc::nccl::sys::is_culib_present() } {
            return Err(GemmError::NcclMissing);
        }
        let seconds = (multi.handles.iter().enumerate())
            .map(|(d, h)| (h.stream().context().new_stream()).map_err(cuda(d, "making a stream")))
            .collect::<Result<Vec<_>, _>>()?;
        let comms = Comm::from_devices(seconds).map_err(nccl("making the communicators"))?;
        let scratch = RefCell::new((0..comms.len()).map(|_| Scratch::default()).collect());
        multi.comms = Some(Comms {
            comms,
            broken: Cell::new(false),
            scratch,
        });
        Ok(multi)
    }

    /// The communicators, or why there are none.
    pub(super) fn comms(&self, what: &'static str) -> Result<&[Comm], GemmError> {
        match &self.comms {
            Some(c) if c.broken.get() => Err(GemmError::NcclBroken),
            Some(c) => Ok(&c.comms),
            None => Err(GemmError::NoNccl { what }),
        }
    }

    /// Device `d`'s communicator's stream waits for its handle's stream
    /// (`to_comm`), or the other way.
    pub(super) fn wait(&self, comms: &[Comm], d: usize, to_comm: bool) -> Result<(), GemmError> {
        let (handle, comm) = (self.handles[d].stream(), comms[d].stream());
        let joined = if to_comm {
            comm.join(handle)
        } else {
            handle.join(&comm)
        };
        joined.map_err(cuda(d, "ordering the streams"))
    }

    /// Each device's buffer `xs[d]` by address, with the guard (taken on
    /// its handle's stream) that keeps cudarc's ordering until dropped.
    fn addresses<'a, T, X: DevicePtrMut<T>>(
        &'a self,
        xs: &'a mut [X],
    ) -> (Vec<u64>, Vec<SyncOnDrop<'a>>) {
        (xs.iter_mut().zip(&self.handles))
            .map(|(x, h)| x.device_ptr_mut(h.stream()))
            .unzip()
    }

    /// Enqueues `cfg` split over K, reduced on the devices: afterwards
    /// every device's `c[d]` holds C, `alpha op(A) op(B) + beta C[d]`,
    /// the same bits on every device and every run ([`Reduction`] says
    /// how). `a[d]` and `b[d]` are device `d`'s slices of A and B as
    /// [`super::Part::a_of`] and [`super::Part::b_of`] cut them (one per
    /// device, even for a device the split gives no part); `c[d]` the
    /// whole C on each device (equal C's give equal results). C is f32:
    /// the partial sums are. Each device keeps scratch between calls: a
    /// plane of C's shape and its slots ([`Reduction::slots`]: the
    /// devices' copies of the rows it owns, about one more plane when the
    /// rows divide evenly), allocated by the first call that needs them. Every part and sum is checked
    /// before anything is enqueued. Nothing waits for the GPUs.
    pub fn gemm_reduced<TA, TB, A, B, C>(
        &self,
        cfg: &GemmConfig,
        a: &[A],
        b: &[B],
        c: &mut [C],
    ) -> Result<Vec<(Part, Choice)>, GemmError>
    where
        TA: GemmElement,
        TB: GemmElement,
        A: DevicePtr<TA>,
        B: DevicePtr<TB>,
        C: DevicePtrMut<f32>,
    {
        let comms = self.comms("a reduced K split")?;
        self.check_counts(a.len(), b.len(), c.len())?;
        let parts = split(cfg, self.devices(), Split::K)?;
        let plan = Reduction::of(cfg, self.devices());
        let storage = storage_of::<TA, TB, f32>();
        for part in &parts {
            let d = part.device;
            let lens = (a[d].len(), b[d].len(), plan.plane());
            (self.handles[d].choose_for(&plan.partial(part), lens, storage))
                .map_err(|e| e.on_device(d))?;
        }
        for (d, c) in c.iter().enumerate() {
            if let Some(sum) = plan.owned_sum(d) {
                (sum.check((plan.slots(d), plan.span(&plan.owned[d]).len())))
                    .map_err(|e| e.on_device(d))?;
            }
            (plan.final_sum().check((plan.plane(), c.len()))).map_err(|e| e.on_device(d))?;
            // The sums' kernel loaded now, so that no load fails once
            // data moves.
            self.handles[d].load_sums().map_err(|e| e.on_device(d))?;
        }
        // Scratch: each device's plane (zeros where no part writes one)
        // and its slots, kept from earlier calls where large enough.
        let mut scratch = self
            .comms
            .as_ref()
            .expect("comms above")
            .scratch
            .borrow_mut();
        for (d, (h, sc)) in self.handles.iter().zip(scratch.iter_mut()).enumerate() {
            let s = h.stream();
            for (buf, len) in [
                (&mut sc.plane, plan.plane()),
                (&mut sc.slots, plan.slots(d)),
            ] {
                if len > 0 && buf.as_ref().is_none_or(|b| b.len() < len) {
                    *buf = None;
                    *buf = Some(
                        s.alloc_zeros::<f32>(len)
                            .map_err(cuda(d, "allocating scratch"))?,
                    );
                }
            }
            if !parts.iter().any(|p| p.device == d)
                && let Some(plane) = sc.plane.as_mut()
            {
                let mut plane = plane.slice_mut(0..plan.plane());
                crate::gpu::memset_on(s, &mut plane, 0).map_err(cuda(d, "zeroing a plane"))?;
            }
        }
        // Every device has a plane (C has values); a device that owns no
        // rows has no slots.
        let (mut planes, mut slots): (Vec<_>, Vec<_>) = (scratch.iter_mut())
            .map(|sc| (sc.plane.as_mut().expect("a plane"), sc.slots.as_mut()))
            .unzip();
        let mut done = Vec::with_capacity(parts.len());
        // From the first enqueue on, every way out joins the streams.
        let _joined = Joined { multi: self, comms };
        for part in parts {
            let d = part.device;
            let mut plane = planes[d].slice_mut(0..plan.plane());
            let choice = (self.handles[d].gemm(&plan.partial(&part), &a[d], &b[d], &mut plane))
                .map_err(|e| e.on_device(d))?;
            done.push((part, choice));
        }
        // 1: every device's rows to their owner.
        for d in 0..self.devices() {
            self.wait(comms, d, true)?;
        }
        self.group("moving partial sums to their rows' owners", || {
            for t in plan.transfers() {
                let src = planes[t.from].slice(t.src.clone());
                let owner = slots[t.to].as_mut().expect("an owner has slots");
                let mut dst = owner.slice_mut(t.dst.clone());
                if t.from == t.to {
                    (comms[t.to].stream().memcpy_dtod(&src, &mut dst))
                        .map_err(cuda(t.to, "copying a partial sum"))?;
                } else {
                    let (from, to) = (t.from as i32, t.to as i32);
                    comms[t.from].send(&src, to).map_err(nccl("sending"))?;
                    (comms[t.to].recv(&mut dst, from)).map_err(nccl("receiving"))?;
                }
            }
            Ok(())
        })?;
        // 2: each owner adds its rows' partials in device order.
        for d in 0..self.devices() {
            self.wait(comms, d, false)?;
            if let (Some(sum), Some(w)) = (plan.owned_sum(d), slots[d].as_deref()) {
                let mut rows = planes[d].slice_mut(plan.span(&plan.owned[d]));
                (self.handles[d].sum_planes(&sum, w, &mut rows)).map_err(|e| e.on_device(d))?;
            }
            self.wait(comms, d, true)?;
        }
        // 3: the sums to every device, one group for every owner's rows.
        self.group("broadcasting the sums", || {
            for (root, rows) in plan.owned.iter().enumerate() {
                if rows.is_empty() {
                    continue;
                }
                for (comm, plane) in comms.iter().zip(planes.iter_mut()) {
                    let mut span = plane.slice_mut(plan.span(rows));
                    (comm.broadcast_in_place(&mut span, root as i32))
                        .map_err(nccl("broadcasting"))?;
                }
            }
            Ok(())
        })?;
        // 4: C = alpha * sum + beta * C on every device.
        for d in 0..self.devices() {
            self.wait(comms, d, false)?;
            let sum = planes[d].slice(0..plan.plane());
            (self.handles[d].sum_planes(&plan.final_sum(), &sum, &mut c[d]))
                .map_err(|e| e.on_device(d))?;
        }
        Ok(done)
    }

    /// Enqueues `cfg` with A gathered over the devices while the product
    /// runs ([`Gather`]): `a[d]` is device `d`'s whole A (the caller's
    /// leading dimension) holding its rows [`Gather::chunks`]`[d]`, and
    /// the gather writes the others (the padding between a chunk's rows
    /// too); `b[d]` and `c[d]` are device `d`'s B and C as
    /// [`super::Part::b_of`] and [`super::Part::c_of`] cut them for
    /// [`Split::Columns`]. Afterwards `a[d]` holds all of A and `c[d]` its
    /// columns of C. Returns each part with what computed each chunk (in
    /// chunk order). Every chunk's call is checked before anything is
    /// enqueued. Nothing waits for the GPUs.
    pub fn gather_gemm<TA, TB, TC, A, B, C>(
        &self,
        cfg: &GemmConfig,
        a: &mut [A],
        b: &[B],
        c: &mut [C],
    ) -> Result<Vec<(Part, Vec<Choice>)>, GemmError>
    where
        TA: GemmElement + NcclType,
        TB: GemmElement,
        TC: GemmElement,
        A: DevicePtrMut<TA>,
        B: DevicePtr<TB>,
        C: DevicePtrMut<TC>,
    {
        let comms = self.comms("an all-gather of A")?;
        self.check_counts(a.len(), b.len(), c.len())?;
        let plan = Gather::of(cfg, self.devices())?;
        let storage = storage_of::<TA, TB, TC>();
        let whole_a = cfg.buffer_lens().0;
        for (d, a) in a.iter().enumerate() {
            if a.len() < whole_a {
                let e = GemmError::BufferTooSmall {
                    arg: "a",
                    len: a.len(),
                    needs: whole_a,
                };
                return Err(e.on_device(d));
            }
        }
        let c_lens: Vec<usize> = c.iter().map(|c| c.len()).collect();
        let mut choices = Vec::with_capacity(plan.parts.len());
        for part in &plan.parts {
            let d = part.device;
            let mut chunks = Vec::with_capacity(plan.chunks.len());
            for j in 0..plan.chunks.len() {
                let (call, a_at, c_at) = plan.chunk_call(part, j);
                let lens = (whole_a - a_at, b[d].len(), c_lens[d].saturating_sub(c_at));
                let choice = (self.handles[d].choose_for(&call, lens, storage))
                    .map_err(|e| e.on_device(d))?;
                chunks.push(choice);
            }
            choices.push(chunks);
        }
        // Each device's A and C by address, under guards that keep
        // cudarc's ordering with the caller's other work on them (taken
        // on the handle's stream, released after everything is enqueued
        // and the handle's stream has waited for the communicator's).
        let (a_at, a_guards) = self.addresses(a);
        let (c_at, c_guards) = self.addresses(c);
        // Dropped before the guards on every way out: the handles' streams
        // wait for the broadcasts before A and C are released.
        let _joined = Joined { multi: self, comms };
        // The broadcasts, chunk by chunk, each chunk's arrival an event.
        let mut arrived: Vec<Vec<_>> = (0..self.devices()).map(|_| Vec::new()).collect();
        for d in 0..self.devices() {
            self.wait(comms, d, true)?;
        }
        let comm_streams: Vec<_> = comms.iter().map(|c| c.stream()).collect();
        for root in 0..plan.chunks.len() {
            self.group("broadcasting a chunk of A", || {
                for (d, comm) in comms.iter().enumerate() {
                    // SAFETY: `a[d]` holds the whole A (checked above),
                    // which the span lies in; the handle's stream reads
                    // the chunk only after this broadcast's event.
                    let mut span =
                        unsafe { Region::<TA>::of(a_at[d], plan.a_span(root), &comm_streams[d]) };
                    (comm.broadcast_in_place(&mut span, root as i32))
                        .map_err(nccl("broadcasting"))?;
                }
                Ok(())
            })?;
            for (d, s) in comm_streams.iter().enumerate() {
                let flags = Some(CUevent_flags::CU_EVENT_DISABLE_TIMING);
                arrived[d].push(
                    s.record_event(flags)
                        .map_err(cuda(d, "recording an event"))?,
                );
            }
        }
        // Each device's chunks, its own first, each after its arrival.
        for part in &plan.parts {
            let d = part.device;
            let handle = &self.handles[d];
            for j in plan.order(d) {
                if j != d {
                    (handle.stream().wait(&arrived[d][j]))
                        .map_err(cuda(d, "waiting for a chunk"))?;
                }
                let (call, a_from, c_from) = plan.chunk_call(part, j);
                // SAFETY: the chunk's call was checked against these
                // stretches above; A is read after its chunk arrived, and
                // the chunks' Cs are disjoint rows of C.
                let (a_chunk, mut c_chunk) = unsafe {
                    (
                        Region::<TA>::of(a_at[d], a_from..whole_a, handle.stream()),
                        Region::<TC>::of(c_at[d], c_from..c_lens[d], handle.stream()),
                    )
                };
                (handle.gemm(&call, &a_chunk, &b[d], &mut c_chunk)).map_err(|e| e.on_device(d))?;
            }
        }
        for d in 0..self.devices() {
            self.wait(comms, d, false)?;
        }
        drop((a_guards, c_guards));
        Ok(plan.parts.into_iter().zip(choices).collect())
    }
}
