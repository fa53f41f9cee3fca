package lakehouse.tests;

import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * {@link NioLocalFileSystem} on a disk that fills up: once the files written under the folder
 * {@code lakehouse.tests.fullDisk.under} hold {@code lakehouse.tests.fullDisk.bytes} bytes
 * in all (counted for the whole JVM), every further write there fails as a full local disk
 * does, with {@code IOException: No space left on device}. Writes elsewhere, reads, renames and
 * deletes are the superclass's. A test's own process gets it through {@code fs.file.impl}.
 */
public class FullLocalFileSystem extends LocalFileSystem {
  /** Bytes written under the folder so far, by every instance of this JVM. */
  static final AtomicLong WRITTEN = new AtomicLong();

  public FullLocalFileSystem() {
    super(new Raw());
  }

  /** The raw form: counts the bytes its output streams write under the folder. */
  public static class Raw extends NioLocalFileSystem.Raw {
    private String under = null;
    private long capacity = Long.MAX_VALUE;

    @Override
    public void initialize(java.net.URI uri, Configuration conf) throws IOException {
      super.initialize(uri, conf);
      under = conf.get("lakehouse.tests.fullDisk.under");
      capacity = conf.getLong("lakehouse.tests.fullDisk.bytes", Long.MAX_VALUE);
    }

    @Override
    protected OutputStream createOutputStreamWithMode(
        Path path, boolean append, FsPermission permission) throws IOException {
      OutputStream stream = super.createOutputStreamWithMode(path, append, permission);
      String file = pathToFile(path).getAbsolutePath();
      if (under == null || !file.startsWith(under)) {
        return stream;
      }
      return new FilterOutputStream(stream) {
        private void take(long bytes) throws IOException {
          if (WRITTEN.addAndGet(bytes) > capacity) {
            WRITTEN.addAndGet(-bytes);
            throw new IOException("No space left on device");
          }
        }

        @Override
        public void write(int b) throws IOException {
          take(1);
          out.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
          take(len);
          out.write(b, off, len);
        }
      };
    }
  }
}
