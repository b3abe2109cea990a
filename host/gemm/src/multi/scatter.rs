//! Operands scattered from one device and C collected back to it
//! (feature `nccl`): [`MultiGemm::scatter`] gives each device its part's
//! buffers out of whole operands on a root device, [`MultiGemm::collect`]
//! puts the devices' shards of C back into the whole C there.
//!
//! A shard is packed on the root by a 2D copy ([`crate::gpu::copy_lines`]
//! of its [`Lines`]) and sent through NCCL; a whole operand is sent as it
//! is; the root keeps its own part without a send. The plans are the
//! host helpers' ([`Part::a_share`] and the rest), which the emulator
//! tests follow.

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr, ValidAsZeroBits};
use cudarc::nccl::NcclType;

use super::nccl::{Joined, Region, cuda, nccl};
use super::{Lines, MultiGemm, Part, Share, Split, split};
use crate::blas::{GemmConfig, GemmElement, GemmError};

/// A split call's buffers on its devices, in device order, as
/// [`MultiGemm::gemm`] takes them ([`MultiGemm::scatter`] makes them).
pub struct Scattered<TA, TB, TC> {
    /// The plan (one part per device with work).
    pub parts: Vec<Part>,
    pub a: Vec<CudaSlice<TA>>,
    pub b: Vec<CudaSlice<TB>>,
    pub c: Vec<CudaSlice<TC>>,
}

/// What a device receives of one operand: a buffer of `len` values, and
/// where they come from on the root (`None`: zeros, or nothing read).
struct Piece {
    len: usize,
    from: Option<Share>,
}

impl Piece {
    /// Device's piece of an operand `whole` values long, its part's share
    /// `share` (`None`: the device has no part, and gets one value).
    fn of(share: Option<Share>, whole: usize) -> Self {
        match share {
            None => Self { len: 1, from: None },
            Some(Share::Zeros) => Self {
                len: whole,
                from: None,
            },
            Some(Share::Whole) => Self {
                len: whole,
                from: Some(Share::Whole),
            },
            Some(Share::Lines(l)) => Self {
                len: l.len(),
                from: Some(Share::Lines(l)),
            },
        }
    }
}

impl MultiGemm {
    /// Cuts `cfg` `how` over the devices and gives each device its part's
    /// A, B and C out of the whole operands `a`, `b`, `c` on device
    /// `root` (the caller's leading dimensions): each shard packed on the
    /// root, then sent through NCCL; a device without a part gets buffers
    /// of one value, which the call does not read; a K split's C is the
    /// whole C on device 0 and zeros elsewhere ([`Part::c_share`]).
    /// Returns once everything is enqueued; the buffers are ready on each
    /// device's stream.
    pub fn scatter<TA, TB, TC, A, B, C>(
        &self,
        cfg: &GemmConfig,
        how: Split,
        root: usize,
        (a, b, c): (&A, &B, &C),
    ) -> Result<Scattered<TA, TB, TC>, GemmError>
    where
        TA: GemmElement + NcclType + DeviceRepr + ValidAsZeroBits,
        TB: GemmElement + NcclType + DeviceRepr + ValidAsZeroBits,
        TC: GemmElement + NcclType + DeviceRepr + ValidAsZeroBits,
        A: DevicePtr<TA>,
        B: DevicePtr<TB>,
        C: DevicePtr<TC>,
    {
        let comms = self.comms("scattering operands")?;
        let devices = self.devices();
        if root >= devices {
            return Err(GemmError::NoSuchRoot { root, devices });
        }
        for (arg, stream) in [("a", a.stream()), ("b", b.stream()), ("c", c.stream())] {
            self.check_on(root, arg, stream)?;
        }
        let parts = split(cfg, devices, how)?;
        let (la, lb, lc) = cfg.buffer_lens();
        for (arg, len, needs) in [("a", a.len(), la), ("b", b.len(), lb), ("c", c.len(), lc)] {
            if len < needs {
                let e = GemmError::BufferTooSmall { arg, len, needs };
                return Err(e.on_device(root));
            }
        }
        let part_of = |d: usize| parts.iter().find(|p| p.device == d);
        let pieces = |d: usize| {
            let p = part_of(d);
            [
                Piece::of(p.map(Part::a_share), la),
                Piece::of(p.map(Part::b_share), lb),
                // A K split's device without a part holds zeros of C's
                // length, as `MultiGemm::gemm` leaves it: an all-reduce
                // over every device then adds nothing of its own.
                match (p, how) {
                    (None, Split::K) => Piece::of(Some(Share::Zeros), lc),
                    _ => Piece::of(p.map(Part::c_share), lc),
                },
            ]
        };
        let out = Scattered {
            a: self.receive(comms, root, a, 0, &pieces)?,
            b: self.receive(comms, root, b, 1, &pieces)?,
            c: self.receive(comms, root, c, 2, &pieces)?,
            parts,
        };
        Ok(out)
    }

    /// Every device's piece `which` (0, 1, 2: A, B, C) of `x` on `root`:
    /// allocated on each device, packed on the root, sent.
    fn receive<T, X>(
        &self,
        comms: &[cudarc::nccl::Comm],
        root: usize,
        x: &X,
        which: usize,
        pieces: &dyn Fn(usize) -> [Piece; 3],
    ) -> Result<Vec<CudaSlice<T>>, GemmError>
    where
        T: NcclType + DeviceRepr + ValidAsZeroBits,
        X: DevicePtr<T>,
    {
        let size = size_of::<T>();
        let root_stream = self.handles[root].stream();
        let mut bufs = Vec::with_capacity(self.devices());
        // What the root sends each device: a packed copy of a shard (on
        // the root, or the device's own buffer if it is the root).
        let mut packed: Vec<Option<CudaSlice<T>>> = Vec::with_capacity(self.devices());
        let (x_ptr, _x_guard) = x.device_ptr(root_stream);
        for d in 0..self.devices() {
            let piece = &pieces(d)[which];
            let stream = self.handles[d].stream();
            let mut buf =
                (stream.alloc_zeros::<T>(piece.len)).map_err(cuda(d, "allocating a shard"))?;
            let mut pack = None;
            if let Some(Share::Lines(l)) = piece.from {
                let mut on_root = if d == root {
                    None
                } else {
                    let t = root_stream.alloc_zeros::<T>(l.len());
                    Some(t.map_err(cuda(root, "allocating a packed shard"))?)
                };
                {
                    let dst = on_root.as_mut().unwrap_or(&mut buf);
                    let (dst_ptr, _dst_guard) = dst.device_ptr_mut(root_stream);
                    // SAFETY: the call's checks hold x to the whole
                    // operand, which the lines lie in; `dst` holds
                    // `l.len()` values; both on the root, ordered on its
                    // handle's stream.
                    unsafe { copy_shard(root_stream, x_ptr, dst_ptr, &l, size, true) }
                        .map_err(cuda(root, "packing a shard"))?;
                }
                pack = on_root;
            }
            if d == root && matches!(piece.from, Some(Share::Whole)) {
                // SAFETY: the call's checks hold x to the whole operand's
                // `piece.len` values, on the root, whose handle's stream
                // orders this copy after the guard of x.
                let src = unsafe { Region::<T>::of(x_ptr, 0..piece.len, root_stream) };
                (root_stream.memcpy_dtod(&src, &mut buf)).map_err(cuda(d, "copying an operand"))?;
            }
            packed.push(pack);
            bufs.push(buf);
        }
        // From here on, every way out joins the streams (before `packed`
        // is freed).
        let _joined = Joined { multi: self, comms };
        for d in 0..self.devices() {
            self.wait(comms, d, true)?;
        }
        self.group("sending shards", || {
            for (d, buf) in bufs.iter_mut().enumerate() {
                let piece = &pieces(d)[which];
                if d == root {
                    // The root's own piece was copied or packed in place.
                    continue;
                }
                match piece.from {
                    None => {}
                    Some(Share::Whole) => {
                        let comm_stream = comms[root].stream();
                        // SAFETY: the call's checks hold x to the whole
                        // operand's `piece.len` values; the root's
                        // communicator's stream waited for its handle's,
                        // on which the guard of x was taken.
                        let src = unsafe { Region::<T>::of(x_ptr, 0..piece.len, &comm_stream) };
                        comms[root].send(&src, d as i32).map_err(nccl("sending"))?;
                        comms[d].recv(buf, root as i32).map_err(nccl("receiving"))?;
                    }
                    Some(Share::Lines(_)) => {
                        let src = packed[d].as_ref().expect("packed above");
                        comms[root].send(src, d as i32).map_err(nccl("sending"))?;
                        comms[d].recv(buf, root as i32).map_err(nccl("receiving"))?;
                    }
                    Some(Share::Zeros) => unreachable!("zeros are not sent"),
                }
            }
            Ok(())
        })?;
        for d in 0..self.devices() {
            self.wait(comms, d, false)?;
        }
        // cudarc recorded the buffers' write events on the communicators'
        // streams before NCCL enqueued the receives: recorded again on the
        // handles' streams, after them, so that another stream that uses
        // a buffer waits for its data.
        for (buf, h) in bufs.iter_mut().zip(&self.handles) {
            drop(buf.device_ptr_mut(h.stream()));
        }
        Ok(bufs)
    }

    /// Each device's C shard of `s` back into the whole C `c` on `root`:
    /// received there through NCCL (the root's own shard copied), then put
    /// in place by a 2D copy. Refused for a K split, whose parts are
    /// partial sums ([`MultiGemm::gemm_reduced`] gives every device C).
    pub fn collect<TA, TB, TC, C>(
        &self,
        s: &Scattered<TA, TB, TC>,
        root: usize,
        c: &mut C,
    ) -> Result<(), GemmError>
    where
        TC: NcclType + DeviceRepr + ValidAsZeroBits,
        C: DevicePtrMut<TC>,
    {
        let comms = self.comms("collecting C")?;
        let devices = self.devices();
        if root >= devices {
            return Err(GemmError::NoSuchRoot { root, devices });
        }
        let Some(first) = s.parts.first() else {
            return Ok(());
        };
        let needs = first.whole().buffer_lens().2;
        if c.len() < needs {
            let e = GemmError::BufferTooSmall {
                arg: "c",
                len: c.len(),
                needs,
            };
            return Err(e.on_device(root));
        }
        self.check_counts(s.a.len(), s.b.len(), s.c.len())?;
        self.check_on(root, "c", c.stream())?;
        let mut lines = Vec::with_capacity(s.parts.len());
        for part in &s.parts {
            let Share::Lines(l) = part.c_share() else {
                return Err(GemmError::PartialNotPlaced);
            };
            if part.device >= devices || l.end() > c.len() {
                let e = GemmError::BufferTooSmall {
                    arg: "c",
                    len: c.len(),
                    needs: l.end(),
                };
                return Err(e.on_device(root));
            }
            self.check_on(part.device, "shard", s.c[part.device].stream())?;
            let got = s.c.get(part.device).map_or(0, |b| b.len());
            if got < l.len() {
                let e = GemmError::BufferTooSmall {
                    arg: "shard",
                    len: got,
                    needs: l.len(),
                };
                return Err(e.on_device(part.device));
            }
            lines.push(l);
        }
        let root_stream = self.handles[root].stream();
        let mut received = Vec::with_capacity(s.parts.len());
        for (part, l) in s.parts.iter().zip(&lines) {
            received.push(if part.device == root {
                None
            } else {
                let t = root_stream.alloc_zeros::<TC>(l.len());
                Some(t.map_err(cuda(root, "allocating a shard"))?)
            });
        }
        let _joined = Joined { multi: self, comms };
        for d in 0..devices {
            self.wait(comms, d, true)?;
        }
        self.group("receiving shards of C", || {
            for (part, into) in s.parts.iter().zip(received.iter_mut()) {
                if let Some(into) = into {
                    let d = part.device;
                    let shard = s.c[d].slice(0..into.len());
                    comms[d]
                        .send(&shard, root as i32)
                        .map_err(nccl("sending"))?;
                    comms[root]
                        .recv(into, d as i32)
                        .map_err(nccl("receiving"))?;
                }
            }
            Ok(())
        })?;
        for d in 0..devices {
            self.wait(comms, d, false)?;
        }
        // The shards' read events again on the handles' streams, after
        // the sends (cudarc recorded them before NCCL enqueued them).
        for (c, h) in s.c.iter().zip(&self.handles) {
            drop(c.device_ptr(h.stream()));
        }
        let (c_ptr, _c_guard) = c.device_ptr_mut(root_stream);
        for ((part, l), into) in s.parts.iter().zip(&lines).zip(&received) {
            let shard = into.as_ref().unwrap_or(&s.c[part.device]);
            let (shard_ptr, _guard) = shard.device_ptr(root_stream);
            // SAFETY: `c` holds the whole C (checked), which the lines lie
            // in; the shard holds `l.len()` values (checked); both on the
            // root, ordered on its handle's stream after the receives.
            unsafe { copy_shard(root_stream, c_ptr, shard_ptr, l, size_of::<TC>(), false) }
                .map_err(cuda(root, "placing a shard"))?;
        }
        Ok(())
    }
}

/// Copies the lines `l` of the whole operand at `whole` (elements of
/// `size` bytes) to the packed shard at `shard` (`pack`), or back.
///
/// # Safety
/// As [`crate::gpu::copy_lines`]: the whole operand holds the lines, the
/// shard `l.len()` values.
unsafe fn copy_shard(
    stream: &cudarc::driver::CudaStream,
    whole: u64,
    shard: u64,
    l: &Lines,
    size: usize,
    pack: bool,
) -> Result<(), cudarc::driver::DriverError> {
    let strided = (whole + (l.start * size) as u64, l.pitch * size);
    let packed = (shard, l.line * size);
    let (src, dst) = if pack {
        (strided, packed)
    } else {
        (packed, strided)
    };
    // SAFETY: the caller's word.
    unsafe { crate::gpu::copy_lines(stream, src, dst, (l.lines, l.line * size)) }
}
