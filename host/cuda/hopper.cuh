// The device helpers the Hopper twins share (wgmma_ws.cu for step 13,
// wgmma_bf16_persistent.cu for steps 20 and 22), one for each helper of
// kernels-gpu/src/device/ they need (shared::address, mbarrier, tma,
// wgmma's descriptor, commit and setmaxnreg): each asm statement is the
// Rust helper's template with the same operands; those the Rust side
// writes without `nomem` are `asm volatile` with a "memory" clobber,
// cvta.to.shared (`pure, nomem` in Rust) plain `asm`. NVRTC gets this
// file in place of its #include (host::baselines::TwinSource::source_for_nvrtc).

#pragma once

typedef unsigned long long usize;

extern __shared__ float hopper_smem[];

// device::shared::address: `cvta.to.shared` of the region's start, plus
// 4 * word bytes (u32).
static __device__ __forceinline__ unsigned hopper_address(usize word) {
    unsigned long long window;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(window) : "l"((unsigned long long)hopper_smem));
    return (unsigned)window + 4u * (unsigned)word;
}

// device::mbarrier.
static __device__ __forceinline__ void hopper_mbar_init(unsigned bar, unsigned arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(arrivals) : "memory");
}

static __device__ __forceinline__ void hopper_mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(bar), "r"(bytes) : "memory");
}

static __device__ __forceinline__ void hopper_mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}

static __device__ __forceinline__ void hopper_mbar_wait(unsigned bar, unsigned parity) {
    for (;;) {
        unsigned done;
        asm volatile("{\n"
                     ".reg .pred done;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 done, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, done;\n"
                     "}"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
        if (done != 0) return;
    }
}

static __device__ __forceinline__ void hopper_fence_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// device::tma.
static __device__ __forceinline__ void hopper_prefetch_map(const unsigned char* map) {
    asm volatile("prefetch.tensormap [%0];" :: "l"((unsigned long long)map) : "memory");
}

static __device__ __forceinline__ void hopper_load_2d(const unsigned char* map, usize word,
                                                  unsigned col, unsigned row, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];"
                 :: "r"(hopper_address(word)), "l"((unsigned long long)map), "r"(col), "r"(row),
                    "r"(bar)
                 : "memory");
}

// device::tma::TensorMap::store_2d: the box at shared word `word` to the
// part of the matrix from column `col`, row `row` that lies inside it, in
// this thread's current bulk group.
static __device__ __forceinline__ void hopper_store_2d(const unsigned char* map, usize word,
                                                   unsigned col, unsigned row) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                 :: "l"((unsigned long long)map), "r"(col), "r"(row), "r"(hopper_address(word))
                 : "memory");
}

// device::tma::bulk_commit, bulk_wait_read::<N>, bulk_wait.
static __device__ __forceinline__ void hopper_bulk_commit() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

template <unsigned N>
static __device__ __forceinline__ void hopper_bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory");
}

static __device__ __forceinline__ void hopper_bulk_wait() {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// device::wgmma::fence_proxy_async: this thread's shared-memory writes
// become visible to the async proxy (TMA).
static __device__ __forceinline__ void hopper_fence_proxy_async() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// device::wgmma::descriptor_k_major_sw128: a K-major tile with 128-byte
// swizzle at `word` (start >> 4; leading offset 1; stride 1024 >> 4;
// swizzle 1).
static __device__ __forceinline__ unsigned long long hopper_descriptor_k_major_sw128(usize word) {
    unsigned long long address = (unsigned long long)hopper_address(word);
    return ((address & 0x3FFFFull) >> 4) | (1ull << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

// D's 128 registers as operands %0-%127, and their names in a template.
#define HOPPER_D_OPERANDS(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
    "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
    "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
    "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
    "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

#define HOPPER_D_LIST \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// wgmma::commit_group.
static __device__ __forceinline__ void hopper_commit_group() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// wgmma::release_registers / take_registers: `setmaxnreg` to N registers.
template <unsigned N>
static __device__ __forceinline__ void hopper_release_registers() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N) : "memory");
}

template <unsigned N>
static __device__ __forceinline__ void hopper_take_registers() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N) : "memory");
}
