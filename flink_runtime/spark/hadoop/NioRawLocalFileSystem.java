package org.flinkruntime.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Hadoop's RawLocalFileSystem, setting permissions through java.nio instead of a process.
 *
 * <p>Without Hadoop's native library (PySpark ships none), RawLocalFileSystem runs a
 * `chmod` process for every file it creates and every directory it makes: about a dozen
 * per Spark write. java.nio sets the same nine bits in the same call the process would
 * have made. A mode with setuid, setgid or sticky bits (java.nio has none), a file system
 * without POSIX permissions and a machine where the native library is loaded keep
 * Hadoop's own way.
 */
public class NioRawLocalFileSystem extends RawLocalFileSystem {
  // Bit i of a POSIX mode (0 = others' execute ... 8 = owner's read).
  private static final PosixFilePermission[] MODE_BITS = {
    PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
    PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
  };
  private static final int SPECIAL_BITS = 07000;

  @Override
  public void setPermission(Path path, FsPermission permission) throws IOException {
    short mode = permission.toShort();
    if (NativeIO.isAvailable() || (mode & SPECIAL_BITS) != 0) {
      super.setPermission(path, permission);
      return;
    }
    Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
    for (int bit = 0; bit < MODE_BITS.length; bit++) {
      if ((mode & (1 << bit)) != 0) {
        bits.add(MODE_BITS[bit]);
      }
    }
    try {
      Files.setPosixFilePermissions(pathToFile(path).toPath(), bits);
    } catch (UnsupportedOperationException notPosix) {
      super.setPermission(path, permission);
    }
  }
}
