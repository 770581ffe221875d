//go:build !purego

#include "textflag.h"

// ROW accumulates row r of the tile: broadcast A(r,k) from (ptr) and add
// its products with the row k of B (Y8, Y9) to the row's accumulators.
#define ROW(ptr, acc0, acc1) \
	VBROADCASTSD (ptr)(AX*1), Y10; \
	VMULPD       Y8, Y10, Y11;    \
	VADDPD       Y11, acc0, acc0; \
	VMULPD       Y9, Y10, Y12;    \
	VADDPD       Y12, acc1, acc1

// func kernel4x8AVX(k int, a *float64, ars, acs int, b *float64, brs int, c *float64, crs int)
//
// Y0..Y7 hold the 4×8 tile, two registers a row; each k adds A(r,k)·B(k,:)
// with a separate multiply and add (no FMA), as kernelGo does.
TEXT ·kernel4x8AVX(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), R8
	MOVQ ars+16(FP), DX
	MOVQ acs+24(FP), BX
	MOVQ b+32(FP), SI
	MOVQ brs+40(FP), R13
	MOVQ c+48(FP), DI
	MOVQ crs+56(FP), R12
	LEAQ (R8)(DX*1), R9
	LEAQ (R9)(DX*1), R10
	LEAQ (R10)(DX*1), R11
	XORQ AX, AX // offset of column k in A's rows
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	TESTQ CX, CX
	JZ    store

loop:
	VMOVUPD (SI), Y8
	VMOVUPD 32(SI), Y9
	ROW(R8, Y0, Y1)
	ROW(R9, Y2, Y3)
	ROW(R10, Y4, Y5)
	ROW(R11, Y6, Y7)
	ADDQ R13, SI
	ADDQ BX, AX
	DECQ CX
	JNZ  loop

store:
	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	ADDQ    R12, DI
	VMOVUPD Y2, (DI)
	VMOVUPD Y3, 32(DI)
	ADDQ    R12, DI
	VMOVUPD Y4, (DI)
	VMOVUPD Y5, 32(DI)
	ADDQ    R12, DI
	VMOVUPD Y6, (DI)
	VMOVUPD Y7, 32(DI)
	VZEROUPPER
	RET

// func adamAVX(x, m, v, grad *float64, n int, p *adamParams)
//
// Four parameters at a time, the operations of adamGo in its order: the
// same IEEE multiplies, adds, divides and square roots lane by lane.
TEXT ·adamAVX(SB), NOSPLIT, $0-48
	MOVQ         x+0(FP), DI
	MOVQ         m+8(FP), SI
	MOVQ         v+16(FP), DX
	MOVQ         grad+24(FP), BX
	MOVQ         n+32(FP), CX
	MOVQ         p+40(FP), AX
	VBROADCASTSD 0(AX), Y8   // β1
	VBROADCASTSD 8(AX), Y9   // 1−β1
	VBROADCASTSD 16(AX), Y10 // β2
	VBROADCASTSD 24(AX), Y11 // 1−β2
	VBROADCASTSD 32(AX), Y12 // lr
	VBROADCASTSD 40(AX), Y13 // c1
	VBROADCASTSD 48(AX), Y14 // c2
	VBROADCASTSD 56(AX), Y15 // ε
	XORQ         R8, R8
	SHLQ         $3, CX
	TESTQ        CX, CX
	JZ           adamdone

adamloop:
	VMOVUPD (BX)(R8*1), Y0     // g
	VMULPD  (SI)(R8*1), Y8, Y1 // β1·m
	VMULPD  Y0, Y9, Y2         // (1−β1)·g
	VADDPD  Y2, Y1, Y1         // m'
	VMOVUPD Y1, (SI)(R8*1)
	VMULPD  (DX)(R8*1), Y10, Y3 // β2·v
	VMULPD  Y0, Y11, Y4         // (1−β2)·g
	VMULPD  Y0, Y4, Y4          // (1−β2)·g·g
	VADDPD  Y4, Y3, Y3          // v'
	VMOVUPD Y3, (DX)(R8*1)
	VDIVPD  Y13, Y1, Y1         // m'/c1
	VMULPD  Y1, Y12, Y1         // lr·(m'/c1)
	VDIVPD  Y14, Y3, Y3         // v'/c2
	VSQRTPD Y3, Y3
	VADDPD  Y15, Y3, Y3         // √(v'/c2) + ε
	VDIVPD  Y3, Y1, Y1
	VMOVUPD (DI)(R8*1), Y5
	VSUBPD  Y1, Y5, Y5
	VMOVUPD Y5, (DI)(R8*1)
	ADDQ    $32, R8
	CMPQ    R8, CX
	JLT     adamloop

adamdone:
	VZEROUPPER
	RET

// Offsets into sincosTable: each constant four times, one per lane.
#define FOUR_PI 0
#define PI4A 32
#define PI4B 64
#define PI4C 96
#define ONE 128
#define HALF 160
#define COS0 192
#define SIN0 384
#define ABS 576
#define SIGN 608
#define BIG 640
#define ONES32 672

// func sincosAVX2(cos, sin, x *float64, n int, scale, c float64, tab *sincosTable) (slow int)
//
// For four x at a time: cos ← c·cos(scale·x), sin ← c·sin(scale·x), by the
// operations of sincos (math.Sincos's Cody–Waite reduction by π/4 and Cephes
// polynomials) in the same order, the branches on the octant replaced by
// blends and sign flips. The result is nonzero if any scale·x was NaN,
// ±Inf or at least 2^29 in magnitude, which sincos leaves to math.Sincos:
// the caller then recomputes those values.
TEXT ·sincosAVX2(SB), NOSPLIT, $0-64
	MOVQ         cos+0(FP), DI
	MOVQ         sin+8(FP), SI
	MOVQ         x+16(FP), BX
	MOVQ         n+24(FP), CX
	VBROADCASTSD scale+32(FP), Y14
	VBROADCASTSD c+40(FP), Y15
	MOVQ         tab+48(FP), AX
	XORQ         R9, R9 // slow lanes
	XORQ         R8, R8
	SHLQ         $3, CX
	TESTQ        CX, CX
	JZ           sincosdone

sincosloop:
	VMOVUPD    (BX)(R8*1), Y0
	VMULPD     Y14, Y0, Y0       // x = scale·v
	VANDPD     ABS(AX), Y0, Y1   // |x|
	VCMPPD     $5, BIG(AX), Y1, Y2 // not |x| < 2^29 (or NaN)
	VMOVMSKPD  Y2, R10
	ORQ        R10, R9
	VMULPD     FOUR_PI(AX), Y1, Y2
	VCVTTPD2DQY Y2, X3           // j = int(|x|·4/π)
	VPAND      ONES32(AX), X3, X4
	VPADDD     X4, X3, X3        // j += j&1: zeros to the origin
	VCVTDQ2PD  X3, Y5            // y = float(j)
	VPMOVZXDQ  X3, Y6            // j, one per 64-bit lane
	VMULPD     PI4A(AX), Y5, Y7
	VSUBPD     Y7, Y1, Y7
	VMULPD     PI4B(AX), Y5, Y8
	VSUBPD     Y8, Y7, Y7
	VMULPD     PI4C(AX), Y5, Y8
	VSUBPD     Y8, Y7, Y7        // z = ((|x| − y·PI4A) − y·PI4B) − y·PI4C
	VMULPD     Y7, Y7, Y8        // zz

	VMULPD     COS0(AX), Y8, Y9
	VADDPD     COS0+32(AX), Y9, Y9
	VMULPD     Y8, Y9, Y9
	VADDPD     COS0+64(AX), Y9, Y9
	VMULPD     Y8, Y9, Y9
	VADDPD     COS0+96(AX), Y9, Y9
	VMULPD     Y8, Y9, Y9
	VADDPD     COS0+128(AX), Y9, Y9
	VMULPD     Y8, Y9, Y9
	VADDPD     COS0+160(AX), Y9, Y9
	VMULPD     Y8, Y8, Y10
	VMULPD     Y9, Y10, Y9       // zz·zz·P
	VMULPD     HALF(AX), Y8, Y10
	VMOVUPD    ONE(AX), Y11
	VSUBPD     Y10, Y11, Y11     // 1 − 0.5·zz
	VADDPD     Y9, Y11, Y9       // C = cos z

	VMULPD     SIN0(AX), Y8, Y10
	VADDPD     SIN0+32(AX), Y10, Y10
	VMULPD     Y8, Y10, Y10
	VADDPD     SIN0+64(AX), Y10, Y10
	VMULPD     Y8, Y10, Y10
	VADDPD     SIN0+96(AX), Y10, Y10
	VMULPD     Y8, Y10, Y10
	VADDPD     SIN0+128(AX), Y10, Y10
	VMULPD     Y8, Y10, Y10
	VADDPD     SIN0+160(AX), Y10, Y10
	VMULPD     Y8, Y7, Y11
	VMULPD     Y10, Y11, Y10     // z·zz·Q
	VADDPD     Y10, Y7, Y10      // S = sin z

	// The octant j&7 is 0, 2, 4 or 6. Bit 1 of j swaps sine and cosine;
	// the sine's sign flips with bit 2 and the sign of x, the cosine's
	// with bit 1 xor bit 2. Shifted to bit 63 they are blend masks and
	// sign bits.
	VPSLLQ     $62, Y6, Y11
	VPSLLQ     $61, Y6, Y2
	VBLENDVPD  Y11, Y9, Y10, Y12 // sin = swap ? C : S
	VBLENDVPD  Y11, Y10, Y9, Y13 // cos = swap ? S : C
	VXORPD     Y2, Y11, Y11
	VANDPD     SIGN(AX), Y11, Y11
	VXORPD     Y11, Y13, Y13
	VXORPD     Y0, Y2, Y2
	VANDPD     SIGN(AX), Y2, Y2
	VXORPD     Y2, Y12, Y12
	VMULPD     Y15, Y13, Y13
	VMULPD     Y15, Y12, Y12
	VMOVUPD    Y13, (DI)(R8*1)
	VMOVUPD    Y12, (SI)(R8*1)
	ADDQ       $32, R8
	CMPQ       R8, CX
	JLT        sincosloop

sincosdone:
	VZEROUPPER
	MOVQ R9, slow+56(FP)
	RET

// TWO adds the products of column (col) of the four rows with row k of B,
// whose two values lie at (SI) and (SI)(BX*1), to Y0 and Y1.
#define TWO(col) \
	VBROADCASTSD (SI), Y14;        \
	VMULPD       Y14, col, Y15;    \
	VADDPD       Y15, Y0, Y0;      \
	VBROADCASTSD (SI)(BX*1), Y14;  \
	VMULPD       Y14, col, Y15;    \
	VADDPD       Y15, Y1, Y1;      \
	ADDQ         R13, SI

// func twoCols4AVX(k int, a *float64, ars int, b *float64, brs, bcs int, acc *[8]float64)
//
// For four rows of A and the two columns of B, the sums over the first k
// columns of A (k a positive multiple of 4), in order of column, each
// product rounded before it is added (no FMA): acc[r] of column 0 and
// acc[4+r] of column 1. The lanes are the rows: each four columns of the
// four rows are transposed in registers.
TEXT ·twoCols4AVX(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), R8
	MOVQ ars+16(FP), DX
	MOVQ b+24(FP), SI
	MOVQ brs+32(FP), R13
	MOVQ bcs+40(FP), BX
	MOVQ acc+48(FP), DI
	LEAQ (R8)(DX*1), R9
	LEAQ (R9)(DX*1), R10
	LEAQ (R10)(DX*1), R11
	XORQ AX, AX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1

twoloop:
	VMOVUPD    (R8)(AX*1), Y2
	VMOVUPD    (R9)(AX*1), Y3
	VMOVUPD    (R10)(AX*1), Y4
	VMOVUPD    (R11)(AX*1), Y5
	VUNPCKLPD  Y3, Y2, Y6        // a0k a1k a0k+2 a1k+2
	VUNPCKHPD  Y3, Y2, Y7        // a0k+1 a1k+1 a0k+3 a1k+3
	VUNPCKLPD  Y5, Y4, Y8
	VUNPCKHPD  Y5, Y4, Y9
	VPERM2F128 $0x20, Y8, Y6, Y10 // column k
	VPERM2F128 $0x20, Y9, Y7, Y11 // k+1
	VPERM2F128 $0x31, Y8, Y6, Y12 // k+2
	VPERM2F128 $0x31, Y9, Y7, Y13 // k+3
	TWO(Y10)
	TWO(Y11)
	TWO(Y12)
	TWO(Y13)
	ADDQ       $32, AX
	SUBQ       $4, CX
	JNZ        twoloop

	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VZEROUPPER
	RET

// ROW8 accumulates row r of an 8×8 tile: broadcast A(r,k) from (ptr), add
// its products with row k of B (Z8) to the row's accumulator, and step ptr
// to column k+1 of the row.
#define ROW8(ptr, acc, t1, t2) \
	VBROADCASTSD (ptr), t1;  \
	VMULPD       Z8, t1, t2; \
	VADDPD       t2, acc, acc; \
	ADDQ         BX, ptr

// func kernel8x8AVX512(k int, a *float64, ars, acs int, b *float64, brs int, c *float64, crs int)
//
// kernel4x8AVX's tile with eight rows, in AVX-512: Z0..Z7 hold the rows of
// the 8×8 tile; each k adds A(r,k)·B(k,:) with a separate multiply and add
// (no FMA), as kernelGo does.
TEXT ·kernel8x8AVX512(SB), NOSPLIT, $0-64
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), R8
	MOVQ ars+16(FP), DX
	MOVQ acs+24(FP), BX
	MOVQ b+32(FP), SI
	LEAQ (R8)(DX*1), R9
	LEAQ (R9)(DX*1), R10
	LEAQ (R10)(DX*1), R11
	LEAQ (R11)(DX*1), R12
	LEAQ (R12)(DX*1), R13
	LEAQ (R13)(DX*1), AX
	LEAQ (AX)(DX*1), DX
	VXORPD Z0, Z0, Z0
	VXORPD Z1, Z1, Z1
	VXORPD Z2, Z2, Z2
	VXORPD Z3, Z3, Z3
	VXORPD Z4, Z4, Z4
	VXORPD Z5, Z5, Z5
	VXORPD Z6, Z6, Z6
	VXORPD Z7, Z7, Z7
	TESTQ CX, CX
	JZ    store8

loop8:
	VMOVUPD (SI), Z8
	ROW8(R8, Z0, Z16, Z17)
	ROW8(R9, Z1, Z18, Z19)
	ROW8(R10, Z2, Z20, Z21)
	ROW8(R11, Z3, Z22, Z23)
	ROW8(R12, Z4, Z24, Z25)
	ROW8(R13, Z5, Z26, Z27)
	ROW8(AX, Z6, Z28, Z29)
	ROW8(DX, Z7, Z30, Z31)
	ADDQ brs+40(FP), SI
	DECQ CX
	JNZ  loop8

store8:
	MOVQ    c+48(FP), DI
	MOVQ    crs+56(FP), R12
	VMOVUPD Z0, (DI)
	ADDQ    R12, DI
	VMOVUPD Z1, (DI)
	ADDQ    R12, DI
	VMOVUPD Z2, (DI)
	ADDQ    R12, DI
	VMOVUPD Z3, (DI)
	ADDQ    R12, DI
	VMOVUPD Z4, (DI)
	ADDQ    R12, DI
	VMOVUPD Z5, (DI)
	ADDQ    R12, DI
	VMOVUPD Z6, (DI)
	ADDQ    R12, DI
	VMOVUPD Z7, (DI)
	VZEROUPPER
	RET

// func sincosAVX512(cos, sin, x *float64, n int, scale, c float64, tab *sincosTable) (slow int)
//
// sincosAVX2 on eight x at a time, in AVX-512: the same operations lane by
// lane, the table's constants broadcast from their first lane, and the
// blends on the octant done with mask registers.
TEXT ·sincosAVX512(SB), NOSPLIT, $0-64
	MOVQ         cos+0(FP), DI
	MOVQ         sin+8(FP), SI
	MOVQ         x+16(FP), BX
	MOVQ         n+24(FP), CX
	VBROADCASTSD scale+32(FP), Z14
	VBROADCASTSD c+40(FP), Z15
	MOVQ         tab+48(FP), AX
	XORQ         R9, R9 // slow lanes
	XORQ         R8, R8
	SHLQ         $3, CX
	TESTQ        CX, CX
	JZ           sincos8done

sincos8loop:
	VMOVUPD         (BX)(R8*1), Z0
	VMULPD          Z14, Z0, Z0              // x = scale·v
	VANDPD.BCST     ABS(AX), Z0, Z1          // |x|
	VCMPPD.BCST     $5, BIG(AX), Z1, K1      // not |x| < 2^29 (or NaN)
	KMOVB           K1, R10
	ORQ             R10, R9
	VMULPD.BCST     FOUR_PI(AX), Z1, Z2
	VCVTTPD2DQ      Z2, Y3                   // j = int(|x|·4/π)
	VPANDD.BCST     ONES32(AX), Y3, Y4
	VPADDD          Y4, Y3, Y3               // j += j&1: zeros to the origin
	VCVTDQ2PD       Y3, Z5                   // y = float(j)
	VPMOVZXDQ       Y3, Z6                   // j, one per 64-bit lane
	VMULPD.BCST     PI4A(AX), Z5, Z7
	VSUBPD          Z7, Z1, Z7
	VMULPD.BCST     PI4B(AX), Z5, Z8
	VSUBPD          Z8, Z7, Z7
	VMULPD.BCST     PI4C(AX), Z5, Z8
	VSUBPD          Z8, Z7, Z7               // z = ((|x| − y·PI4A) − y·PI4B) − y·PI4C
	VMULPD          Z7, Z7, Z8               // zz

	VMULPD.BCST     COS0(AX), Z8, Z9
	VADDPD.BCST     COS0+32(AX), Z9, Z9
	VMULPD          Z8, Z9, Z9
	VADDPD.BCST     COS0+64(AX), Z9, Z9
	VMULPD          Z8, Z9, Z9
	VADDPD.BCST     COS0+96(AX), Z9, Z9
	VMULPD          Z8, Z9, Z9
	VADDPD.BCST     COS0+128(AX), Z9, Z9
	VMULPD          Z8, Z9, Z9
	VADDPD.BCST     COS0+160(AX), Z9, Z9
	VMULPD          Z8, Z8, Z10
	VMULPD          Z9, Z10, Z9              // zz·zz·P
	VMULPD.BCST     HALF(AX), Z8, Z10
	VBROADCASTSD    ONE(AX), Z11
	VSUBPD          Z10, Z11, Z11            // 1 − 0.5·zz
	VADDPD          Z9, Z11, Z9              // C = cos z

	VMULPD.BCST     SIN0(AX), Z8, Z10
	VADDPD.BCST     SIN0+32(AX), Z10, Z10
	VMULPD          Z8, Z10, Z10
	VADDPD.BCST     SIN0+64(AX), Z10, Z10
	VMULPD          Z8, Z10, Z10
	VADDPD.BCST     SIN0+96(AX), Z10, Z10
	VMULPD          Z8, Z10, Z10
	VADDPD.BCST     SIN0+128(AX), Z10, Z10
	VMULPD          Z8, Z10, Z10
	VADDPD.BCST     SIN0+160(AX), Z10, Z10
	VMULPD          Z8, Z7, Z11
	VMULPD          Z10, Z11, Z10            // z·zz·Q
	VADDPD          Z10, Z7, Z10             // S = sin z

	// As sincosAVX2: bit 1 of j swaps sine and cosine (the mask K2);
	// the sine's sign flips with bit 2 and the sign of x, the cosine's
	// with bit 1 xor bit 2.
	VPSLLQ          $62, Z6, Z11
	VPSLLQ          $61, Z6, Z2
	VPMOVQ2M        Z11, K2
	VBLENDMPD       Z9, Z10, K2, Z12         // sin = swap ? C : S
	VBLENDMPD       Z10, Z9, K2, Z13         // cos = swap ? S : C
	VXORPD          Z2, Z11, Z11
	VANDPD.BCST     SIGN(AX), Z11, Z11
	VXORPD          Z11, Z13, Z13
	VXORPD          Z0, Z2, Z2
	VANDPD.BCST     SIGN(AX), Z2, Z2
	VXORPD          Z2, Z12, Z12
	VMULPD          Z15, Z13, Z13
	VMULPD          Z15, Z12, Z12
	VMOVUPD         Z13, (DI)(R8*1)
	VMOVUPD         Z12, (SI)(R8*1)
	ADDQ            $64, R8
	CMPQ            R8, CX
	JLT             sincos8loop

sincos8done:
	VZEROUPPER
	MOVQ R9, slow+56(FP)
	RET
