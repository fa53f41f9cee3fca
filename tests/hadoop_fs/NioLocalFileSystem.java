package lakehouse.tests;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system without its two shell commands. Without Hadoop's native library
 * (absent here), {@link RawLocalFileSystem} runs {@code chmod} in a new process for every file
 * and directory it creates, and {@code readlink} for every rename through a FileContext (Delta's
 * log, Spark's checkpoint): about 10 ms each from a test's JVM. This one asks Java for the same
 * two answers. Files, renames, listings and their results are the superclass's.
 */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) local file system of {@link NioLocalFileSystem}. */
  public static class Raw extends RawLocalFileSystem {
    /** Permission bits in {@link FsPermission#toShort()} order, from the lowest. */
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE,
      PosixFilePermission.OTHERS_WRITE,
      PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE,
      PosixFilePermission.GROUP_WRITE,
      PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE,
      PosixFilePermission.OWNER_WRITE,
      PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      short mode = permission.toShort();
      Set<PosixFilePermission> granted = EnumSet.noneOf(PosixFilePermission.class);
      for (int bit = 0; bit < BITS.length; bit++) {
        if ((mode & (1 << bit)) != 0) {
          granted.add(BITS[bit]);
        }
      }
      Files.setPosixFilePermissions(pathToFile(path).toPath(), granted);
    }

    @Override
    public FileStatus getFileLinkStatus(Path path) throws IOException {
      if (Files.isSymbolicLink(pathToFile(path).toPath())) {
        return super.getFileLinkStatus(path);
      }
      return getFileStatus(path); // not a link: its own status (FileNotFoundException if absent)
    }
  }
}
