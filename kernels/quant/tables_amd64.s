//go:build !purego

#include "textflag.h"

// Constant tables for the AVX2 kernels.

// qhSpread moves byte k of a broadcast uint32 to bytes 8k..8k+7 (VPSHUFB
// indexes within each 128-bit lane, and every lane holds the whole dword).
DATA ·qhSpread+0(SB)/8, $0x0000000000000000
DATA ·qhSpread+8(SB)/8, $0x0101010101010101
DATA ·qhSpread+16(SB)/8, $0x0202020202020202
DATA ·qhSpread+24(SB)/8, $0x0303030303030303
GLOBL ·qhSpread(SB), RODATA|NOPTR, $32

// iq4nlTable is iq4nlValues in both 128-bit lanes, for VPSHUFB lookups.
DATA ·iq4nlTable+0(SB)/8, $0xf6eaddcfbfad9881
DATA ·iq4nlTable+8(SB)/8, $0x7159453526190d01
DATA ·iq4nlTable+16(SB)/8, $0xf6eaddcfbfad9881
DATA ·iq4nlTable+24(SB)/8, $0x7159453526190d01
GLOBL ·iq4nlTable(SB), RODATA|NOPTR, $32

// packOrder undoes the lane interleaving of VPACKSSDW+VPACKSSWB (VPERMD
// dword indices 0 4 1 5 2 6 3 7).
DATA ·packOrder+0(SB)/4, $0
DATA ·packOrder+4(SB)/4, $4
DATA ·packOrder+8(SB)/4, $1
DATA ·packOrder+12(SB)/4, $5
DATA ·packOrder+16(SB)/4, $2
DATA ·packOrder+20(SB)/4, $6
DATA ·packOrder+24(SB)/4, $3
DATA ·packOrder+28(SB)/4, $7
GLOBL ·packOrder(SB), RODATA|NOPTR, $32
