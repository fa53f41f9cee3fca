package lakehouse.tests;

import java.io.IOException;
import java.net.URI;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

/**
 * A test file system with the limits of an object store: {@code objstore://BUCKET/PATH} is the
 * local file {@code /PATH}, but a directory cannot be renamed (S3, GCS and ADLS without
 * hierarchical namespace have no atomic directory rename). Files rename as before: Spark's
 * checkpoint logs write a temporary file and rename it.
 */
public class ObjStoreFileSystem extends NioLocalFileSystem.Raw {
  public static final String SCHEME = "objstore";
  private URI uri;

  @Override
  public void initialize(URI name, Configuration conf) throws IOException {
    uri = URI.create(SCHEME + "://" + (name.getAuthority() == null ? "" : name.getAuthority()));
    super.initialize(name, conf);
    setWorkingDirectory(new Path(uri.toString() + System.getProperty("user.dir")));
  }

  @Override
  public String getScheme() {
    return SCHEME;
  }

  @Override
  public URI getUri() {
    // The superclass's constructor asks before initialize() named the bucket.
    return uri == null ? URI.create(SCHEME + ":///") : uri;
  }

  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    FileStatus source = getFileStatus(src);
    if (source.isDirectory()) {
      throw new IOException(
          "objstore: a directory cannot be renamed (" + src + " -> " + dst + ")");
    }
    return super.rename(src, dst);
  }
}
