"""The SparkSession a process shares: started on first use, configured from the
cluster's `spark.*` keys, local, standalone, Kubernetes or Spark Connect."""
