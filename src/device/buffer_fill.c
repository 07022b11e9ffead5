/* Queueing a buffer's fill (fill.h), apart from the host fill loop
 * (fill.c), which the services hand to platforms. */
#include <stdio.h>

#include "fill.h"
#include "core/status_impl.h"
#include "enqueue.h"
#include "timeline.h"

static void release_buffer(void *b) { dlrun_buffer_release(b); }

dlrun_status dlrun_buffer_fill_async(dlrun_buffer *b, const dlrun_fill *f) {
  dlrun_status st = dlrun_queue_fill(b->dev, b->kind, b->data, b->nbytes, f, NULL, 0, &b->ready);
  if (st) return st;
  dlrun_buffer_retain(b); /* until the fill is done: back before b reads ready */
  st = dlrun_event_is_timeline(b->ready) ? dlrun_timeline_then_early(b->ready, release_buffer, b)
                                         : dlrun_event_then(b->ready, release_buffer, b);
  if (!st) return DLRUN_OK;
  /* No memory to be called back: the fill is done before b can go. */
  char why[256];
  snprintf(why, sizeof why, "%s", dlrun_last_error());
  dlrun_event_wait(b->ready);
  dlrun_buffer_release(b);
  return dlrun_fail(st, "%s", why);
}
