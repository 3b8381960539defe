"""One plan on many machines: Slurm array scripts and Kubernetes Indexed Jobs that run it as
shards (batch), and the merge of shard runs into one run directory (merge). docs/scale.md."""
