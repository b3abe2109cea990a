//! The checks run on a block's shared-memory logs when a barrier
//! interval closes: races, and bank-conflict accounting.
//!
//! Races: within one interval nothing orders two threads' accesses, so
//! two different threads touching the same word, at least one writing,
//! is a race whatever the interleaving was.
//!
//! Bank conflicts, the model: shared memory has 32 banks of 4-byte words,
//! `bank = word % 32`. Threads `32w .. 32w + 31` (linear id
//! `y * block_x + x`) form warp `w`. The k-th dynamic execution of an
//! access site (a `#[track_caller]` source location) by each thread of a
//! warp within one interval is one warp-instruction. A bank serves one
//! word per wavefront, and any number of threads reading the same word
//! share it (broadcast), so an instruction needs as many wavefronts as the
//! most distinct words any one bank is asked for; its conflicts are that
//! number minus one.
//! A 128-bit access (`load4`/`store4`, a 16-byte `cp.async`, a lane's row
//! of an `ldmatrix`) moves 512 bytes per warp, so the hardware splits it
//! into four phases of eight consecutive lanes (a quarter-warp: 8 x 16
//! bytes = one pass over the 32 banks); each phase is counted as above and
//! the instruction's conflicts are the sum over its phases of its
//! wavefronts minus one, so a conflict-free 128-bit access costs 4
//! wavefronts and counts 0. A 64-bit access is likewise two phases of
//! sixteen lanes. Nsight Compute's
//! `l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}` count the
//! same extra wavefronts.

use super::SharedAccess;
use super::report::{BankStats, Coord, Interval, Op, Race, RaceAccess, Site};

/// Threads per warp, and banks.
const WARP: usize = 32;
const BANKS: usize = 32;

/// Per-interval state of one shared word, for the race check.
#[derive(Clone, Copy, Default)]
struct Word {
    writer: Option<(usize, Site)>,
    /// Up to two distinct readers: enough to find one that is not a
    /// given writer.
    readers: [Option<(usize, Site)>; 2],
    reported: bool,
}

/// One access of a warp-instruction, for the bank check.
#[derive(Clone, Copy)]
struct Lane {
    /// Index into `IntervalCheck::sites`.
    site: usize,
    /// This lane's execution count of the site in the interval.
    nth: u32,
    lane: u8,
    word: u32,
}

/// A block's checker: reusable buffers, and its bank accounting so far.
pub(super) struct IntervalCheck {
    words: Vec<Word>,
    /// Sites seen, with the op and width their accesses had.
    sites: Vec<(Site, Op, usize)>,
    counts: Vec<u32>,
    lanes: Vec<Lane>,
    banks: BankStats,
}

impl IntervalCheck {
    pub fn new(shared_words: usize) -> Self {
        Self {
            words: vec![Word::default(); shared_words],
            sites: Vec::new(),
            counts: Vec::new(),
            lanes: Vec::new(),
            banks: BankStats::default(),
        }
    }

    /// The block's bank accounting, which starts again from zero.
    pub fn take_banks(&mut self) -> BankStats {
        std::mem::take(&mut self.banks)
    }

    /// Checks one interval's logs (`logs[tid]`, in program order) and
    /// returns its races.
    pub fn close(
        &mut self,
        logs: &[Vec<SharedAccess>],
        block: Coord,
        dims: Coord,
        interval: Interval,
        kernel: &'static str,
    ) -> Vec<Race> {
        let races = self.races(logs, block, dims, interval, kernel);
        for warp in logs.chunks(WARP) {
            self.warp_banks(warp);
        }
        races
    }

    fn races(
        &mut self,
        logs: &[Vec<SharedAccess>],
        block: Coord,
        dims: Coord,
        interval: Interval,
        kernel: &'static str,
    ) -> Vec<Race> {
        if logs.iter().all(Vec::is_empty) {
            return Vec::new();
        }
        self.words.fill(Word::default());
        let coord = |tid: usize| (tid % dims.0, tid / dims.0);
        let mut races = Vec::new();
        for (tid, log) in logs.iter().enumerate() {
            for access in log {
                let start = access.word as usize;
                for word in start..start + access.width as usize {
                    let state = &mut self.words[word];
                    let me = (tid, access.site);
                    // Another thread's access this one conflicts with, if any.
                    let other = match access.op {
                        Op::Store => state
                            .writer
                            .filter(|w| w.0 != tid)
                            .map(|w| (w, Op::Store))
                            .or_else(|| {
                                state
                                    .readers
                                    .iter()
                                    .flatten()
                                    .find(|r| r.0 != tid)
                                    .map(|&r| (r, Op::Load))
                            }),
                        Op::Load => state.writer.filter(|w| w.0 != tid).map(|w| (w, Op::Store)),
                    };
                    match access.op {
                        Op::Store => {
                            state.writer.get_or_insert(me);
                        }
                        Op::Load => match state.readers {
                            [None, _] => state.readers[0] = Some(me),
                            [Some(r), None] if r.0 != tid => state.readers[1] = Some(me),
                            _ => {}
                        },
                    }
                    if let Some(((other_tid, other_site), other_op)) = other
                        && !state.reported
                    {
                        state.reported = true;
                        races.push(Race {
                            kernel,
                            block,
                            word,
                            first: RaceAccess {
                                thread: coord(other_tid),
                                op: other_op,
                                site: other_site,
                            },
                            second: RaceAccess {
                                thread: coord(tid),
                                op: access.op,
                                site: access.site,
                            },
                            interval,
                        });
                    }
                }
            }
        }
        races
    }

    /// Groups one warp's accesses into warp-instructions (site, k-th
    /// execution) and counts their conflicts.
    fn warp_banks(&mut self, warp: &[Vec<SharedAccess>]) {
        self.lanes.clear();
        for (lane, log) in warp.iter().enumerate() {
            self.counts.iter_mut().for_each(|c| *c = 0);
            for access in log.iter().filter(|a| a.banks) {
                let site = match self
                    .sites
                    .iter()
                    .position(|s| std::ptr::eq(s.0, access.site) || *s.0 == *access.site)
                {
                    Some(i) => i,
                    None => {
                        self.sites
                            .push((access.site, access.op, access.width as usize));
                        self.counts.push(0);
                        self.sites.len() - 1
                    }
                };
                self.lanes.push(Lane {
                    site,
                    nth: self.counts[site],
                    lane: lane as u8,
                    word: access.word,
                });
                self.counts[site] += 1;
            }
        }
        self.lanes.sort_unstable_by_key(|l| (l.site, l.nth, l.lane));
        for instruction in self
            .lanes
            .chunk_by(|a, b| (a.site, a.nth) == (b.site, b.nth))
        {
            let (site, op, width) = self.sites[instruction[0].site];
            // A phase is 32 / width lanes: one pass over the 32 banks.
            let lanes_per_phase = WARP / width;
            let conflicts = (0..width)
                .map(|phase| {
                    let words = instruction
                        .iter()
                        .filter(|l| l.lane as usize / lanes_per_phase == phase)
                        .flat_map(|l| l.word..l.word + width as u32);
                    wavefronts(words).saturating_sub(1)
                })
                .sum();
            self.banks.add(site, op, width, conflicts);
        }
    }
}

/// Wavefronts to serve `words` (up to 32 per call): the most distinct
/// words any one bank holds. 0 for no words.
fn wavefronts(words: impl Iterator<Item = u32>) -> u64 {
    let mut distinct = [0u32; WARP];
    let mut n = 0;
    for w in words {
        if !distinct[..n].contains(&w) {
            distinct[n] = w;
            n += 1;
        }
    }
    let mut per_bank = [0u64; BANKS];
    for w in &distinct[..n] {
        per_bank[*w as usize % BANKS] += 1;
    }
    per_bank.into_iter().max().unwrap_or(0)
}
