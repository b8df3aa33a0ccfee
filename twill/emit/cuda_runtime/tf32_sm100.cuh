// ==== TF32 tensor-core inputs (sm_100a): tcgen05.mma kind::tf32 ===========================================
// Included only by kernels with an mma of f32 operands (Triton's tl.dot of fp32 tensors, input_precision
// "tf32"). One instruction is M x N x 8 (32 bytes of each operand row, as kind::f16's x 16), both operands
// K-major from shared memory; the tensor core reads each f32 as TF32 (its top 19 bits).
//
// Instruction descriptor (PTX ISA, tcgen05 instruction descriptor): D format F32 = 1 in bits 4-5, A and B
// format TF32 = 2 in bits 7-9 and 10-12 (kind::f16 and kind::tf32: F16 = 0, BF16 = 1, TF32 = 2), K-major A
// and B (bits 15, 16 clear), N >> 3 in bits 17-22, M >> 4 in bits 24-28.
template <int M, int N>
__host__ __device__ constexpr uint32_t umma_idesc_tf32() {
  return (1u << 4) | (2u << 7) | (2u << 10) | (static_cast<uint32_t>(N >> 3) << 17) |
         (static_cast<uint32_t>(M >> 4) << 24);
}

// D (tensor memory) (+)= A (shared, descriptor) x B (shared, descriptor); issued by one thread.
__device__ __forceinline__ void umma_ss_tf32(uint32_t d, uint64_t a, uint64_t b, uint32_t idesc, uint32_t accumulate) {
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
               "tcgen05.mma.cta_group::1.kind::tf32 [%0], %1, %2, %3, p;\n\t}"
               :: "r"(d), "l"(a), "l"(b), "r"(idesc), "r"(accumulate) : "memory");
}
