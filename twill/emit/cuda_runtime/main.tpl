#ifdef TWILL_MAIN
// A smoke test: random inputs, one warm-up and ten timed launches, a checksum of each output.
// Usage: ./a.out [tiles_m tiles_n iters batch]
template <typename T>
static T* twill_random_tensor(size_t n, unsigned seed) {
  T* host = static_cast<T*>(malloc(n * sizeof(T)));
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    host[i] = static_cast<T>(static_cast<float>((seed >> 9) & 0xffff) / 65536.0f - 0.5f);
  }
  T* dev = nullptr;
  if (cudaMalloc(&dev, n * sizeof(T)) != cudaSuccess) exit(1);
  cudaMemcpy(dev, host, n * sizeof(T), cudaMemcpyHostToDevice);
  free(host);
  return dev;
}

template <typename T>
static double twill_checksum(const T* dev, size_t n) {
  T* host = static_cast<T*>(malloc(n * sizeof(T)));
  cudaMemcpy(host, dev, n * sizeof(T), cudaMemcpyDeviceToHost);
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(static_cast<float>(host[i]));
  free(host);
  return s;
}

int main(int argc, char** argv) {
  {{ns}}::Problem p;
  if (argc > 4) {
    p.tiles_m = atoi(argv[1]);
    p.tiles_n = atoi(argv[2]);
    p.iters = atoi(argv[3]);
    p.batch = atoi(argv[4]);
  } else {
    p.iters = {{iters}};
  }
  {{inputs}}
  cudaError_t err = {{ns}}::launch(p);
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    printf("launch failed: %s\n", cudaGetErrorString(err));
    return 1;
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  for (int rep = 0; rep < 10; ++rep) {{ns}}::launch(p);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  printf("%.4f ms per launch\n", ms / 10);
  {{checksums}}
  return 0;
}
#endif  // TWILL_MAIN
