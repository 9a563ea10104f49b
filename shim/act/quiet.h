#pragma once
// Movable memory that has not moved yet. Under policy auto every allocation of 1 MiB or more is
// movable from the start, so that it can leave when the program outgrows the budget; a program
// that fits would otherwise pay for each launch's scan, plan, mark and step learning, on the
// thread that launches (docs/benchmarks.md, "A step that fits: quiet devices"). While nothing of a
// device ever left it, was made off it or was managed memory, the device is quiet: launches and
// copies over its memory are let through unscanned and only counted, and the first move that
// stirs it (act/residency.cc, under the residency lock) waits for the whole context before copying
// anything, as after any work no scan saw (act/swap/scan.cc). From then on every launch is scanned
// (GPUMEMSHIM_SWAP_QUIET=off: from the start).
// What a kernel launched while quiet wrote as a pointer table (act/tables.h) is learnt only when its
// writer runs again after the stir.
#include <cstdint>

namespace gms::act::quiet {

// Whether `dev` is still quiet (never under GPUMEMSHIM_SWAP_QUIET=off, nor a device out of range).
bool is(int dev);
// Whether launches and copies on `dev` go unscanned: it is quiet, and no trace needs the
// allocations each launch uses.
bool unscanned(int dev);
// Sticky: `dev` has memory that moved or may move. Caller holds the residency lock.
void stir(int dev);
// A launch let through unscanned while quiet, counted as work no scan saw (here, and for the rule
// for large allocations made again); and how many so far.
void count_launch();
uint64_t launches();

}  // namespace gms::act::quiet
