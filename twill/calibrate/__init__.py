"""`twill calibrate`: a machine description measured on the GPU it describes.

The flow, one module per step:

    benches.py   the microbenchmarks: CUDA sources in kernels/, the target each needs
    build.py     nvcc: each source to a program (or a compile check where the card cannot run it)
    run.py       run the programs, collect their JSON (raw samples), detect "no GPU here"
    stats.py     the spread of a list of samples: min, median, 99th percentile
    derive.py    raw samples -> the machine file's numbers, each with the measurement it came from
    write.py     the machine YAML: the base spec's layout, measured values in, a `calibration:` section

Nothing here imports a solver, so a GPU machine with only PyYAML and click can run it.
"""
