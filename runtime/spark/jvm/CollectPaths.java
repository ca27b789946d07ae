package lakeview.actions;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.Consumer;

/**
 * The "delete function" handed to Iceberg's maintenance actions (expire snapshots, delete
 * orphan files): it deletes nothing, it only collects the paths the action would delete, so
 * that the app deletes them itself with its own check that each lies inside the table's
 * location (catalog/core/purge.py). Thread-safe: actions may call it from several threads.
 */
public final class CollectPaths implements Consumer<String> {
  private final ConcurrentLinkedQueue<String> paths = new ConcurrentLinkedQueue<>();

  @Override
  public void accept(String path) {
    paths.add(path);
  }

  /** The paths collected so far, removed from the collector. */
  public List<String> drain() {
    List<String> out = new ArrayList<>();
    String path;
    while ((path = paths.poll()) != null) {
      out.add(path);
    }
    return out;
  }
}
