// Synchronisation costs as the emitted kernels pay them. Hand-off: warpgroup 0's thread 0 stores a
// word to shared memory and arrives on an mbarrier; warpgroup 1 waits on it (all 128 threads, as a
// consumer does), reads the word, and its thread 0 answers on a second mbarrier; half the round
// trip is one cross-warpgroup hand-off (twill's communication.cross_warp_cycles). Local: one thread
// arrives on an mbarrier and waits for its phase. Named barrier: bar.sync over two warpgroups,
// cycles per barrier; ping-pong: bar.arrive by one warpgroup and bar.sync by the other, in turns.
// setmaxnreg: cycles of a warpgroup's setmaxnreg.dec to 24 and of the others' .inc to 240 at entry.
#include "bench.cuh"

constexpr int ROUNDS = 256;

__global__ void __launch_bounds__(256, 1) handoff(long long* out) {
  __shared__ uint64_t bar[2];
  __shared__ volatile int word;
  if (threadIdx.x == 0) { cal::mbar_init(&bar[0], 1); cal::mbar_init(&bar[1], 128); word = 0; cal::mbar_fence_init(); }
  __syncthreads();
  const int wg = threadIdx.x / 128;
  int seen = 0;
  long long c0 = cal::clk();
  // Thread 0 (the producer) and the 128 threads of warpgroup 1 (the consumer, each of which waits and
  // then arrives, so no phase can run two ahead of a slow thread).
  if (threadIdx.x == 0) {
    for (int r = 0; r < ROUNDS; ++r) { word = r + 1; cal::mbar_arrive(&bar[0]); cal::mbar_wait(&bar[1], r & 1); }
  } else if (wg == 1) {
    for (int r = 0; r < ROUNDS; ++r) { cal::mbar_wait(&bar[0], r & 1); seen += word; cal::mbar_arrive(&bar[1]); }
  }
  long long c1 = cal::clk();
  if (threadIdx.x == 0) out[blockIdx.x] = c1 - c0;
  if (seen == -1) out[0] = seen;
}

__global__ void local_mbar(long long* out) {
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) { cal::mbar_init(&bar, 1); cal::mbar_fence_init(); }
  __syncthreads();
  if (threadIdx.x != 0) return;  // one thread: the barrier expects one arrival a phase
  long long c0 = cal::clk();
  for (int r = 0; r < ROUNDS; ++r) { cal::mbar_arrive(&bar); cal::mbar_wait(&bar, r & 1); }
  long long c1 = cal::clk();
  out[blockIdx.x] = c1 - c0;
}

__global__ void __launch_bounds__(256, 1) named(long long* out, int pingpong) {
  const int wg = threadIdx.x / 128;
  __syncthreads();
  long long c0 = cal::clk();
  if (!pingpong) {
    for (int r = 0; r < ROUNDS; ++r) cal::named_sync(1, 256);
  } else {
    for (int r = 0; r < ROUNDS; ++r) {  // FA3's scheduler barriers: each warpgroup lets the other go in turn
      if (wg == 0) { cal::named_arrive(2, 256); cal::named_sync(3, 256); }
      else { cal::named_sync(2, 256); cal::named_arrive(3, 256); }
    }
  }
  long long c1 = cal::clk();
  if (threadIdx.x == 0) out[blockIdx.x] = c1 - c0;
}

__global__ void __launch_bounds__(384, 1) regs(long long* out) {
  const int wg = threadIdx.x / 128;
  __syncthreads();
  long long c0 = cal::clk();
  if (wg == 0) asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
  else asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  long long c1 = cal::clk();
  if (threadIdx.x % 128 == 0) out[blockIdx.x * 3 + wg] = c1 - c0;
}

static std::vector<double> per_round(long long* dev, int n, int stride, int pick, double div) {
  std::vector<long long> h((size_t)n * stride);
  CK(cudaMemcpy(h.data(), dev, 8ull * n * stride, cudaMemcpyDeviceToHost));
  std::vector<double> v;
  for (int i = 0; i < n; i += 3) v.push_back((double)h[(size_t)i * stride + pick] / div);
  return v;
}

int main() {
  cal::device_or_exit();
  int sms = cal::sm_count();
  long long* out;
  CK(cudaMalloc(&out, 8ull * 3 * sms));
  cal::Records rec;
  std::vector<double> hand, loc, nsync, ping, dec, inc;
  for (int rep = 0; rep < 4; ++rep) {
    handoff<<<sms, 256>>>(out); LAUNCHED();
    if (rep) for (double x : per_round(out, sms, 1, 0, 2.0 * ROUNDS)) hand.push_back(x);
    local_mbar<<<sms, 32>>>(out); LAUNCHED();
    if (rep) for (double x : per_round(out, sms, 1, 0, ROUNDS)) loc.push_back(x);
    named<<<sms, 256>>>(out, 0); LAUNCHED();
    if (rep) for (double x : per_round(out, sms, 1, 0, ROUNDS)) nsync.push_back(x);
    named<<<sms, 256>>>(out, 1); LAUNCHED();
    if (rep) for (double x : per_round(out, sms, 1, 0, 2.0 * ROUNDS)) ping.push_back(x);
    regs<<<sms, 384>>>(out); LAUNCHED();
    if (rep) {
      for (double x : per_round(out, sms, 3, 0, 1.0)) dec.push_back(x);
      for (double x : per_round(out, sms, 3, 1, 1.0)) inc.push_back(x);
    }
  }
  rec.add(cal::record("mbarrier_handoff", "{\"from\": \"warpgroup\", \"to\": \"warpgroup\"}", "cycles", hand));
  rec.add(cal::record("mbarrier_local", "{\"threads\": 1}", "cycles", loc));
  rec.add(cal::record("named_barrier", "{\"threads\": 256, \"pattern\": \"sync\"}", "cycles", nsync));
  rec.add(cal::record("named_barrier", "{\"threads\": 256, \"pattern\": \"pingpong\"}", "cycles", ping));
  rec.add(cal::record("setmaxnreg", "{\"op\": \"dec\", \"registers\": 24}", "cycles", dec));
  rec.add(cal::record("setmaxnreg", "{\"op\": \"inc\", \"registers\": 240}", "cycles", inc));
  rec.print("sync");
  return 0;
}
