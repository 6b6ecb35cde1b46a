package org.flinkruntime.hadoop;

import org.apache.hadoop.fs.LocalFileSystem;

/**
 * Hadoop's LocalFileSystem (checksums and all) over NioRawLocalFileSystem: what Spark
 * uses for file:// paths when `spark.hadoop.fs.file.impl` names this class.
 */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new NioRawLocalFileSystem());
  }
}
