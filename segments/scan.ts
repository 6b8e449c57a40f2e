// Sequential validation of a segment's frames: the one place that walks a segment file.
//
// Owns: `scanFrames`, used by recovery (the last segment's valid prefix) and by an index rebuild
// (a sealed segment that must validate completely). Guarantees: memory stays bounded by one read
// window (1 MiB, or one frame when a frame is larger); a length field is checked against
// `maxRecordBytes` and against the file's size before it drives any allocation; the scan stops at
// the first frame that fails, and says where and why.

import type { FileHandle } from '../lib/fs/types.js';
import { FRAME_HEADER_BYTES, checkFrame, frameLength, type FrameCheck } from './format.js';
import { ZEROS, isZeroBytes } from './segment-files.js';

const WINDOW_BYTES = 1 << 20;

export interface ScanResult {
  /** Frames that validated. */
  count: number;
  /** Offset just after the last valid frame: where the next frame goes. */
  endOffset: number;
  /** Why the scan stopped: 'limit' (read `maxCount` frames), 'end' (file ends exactly there) or a failed check. */
  stop: 'limit' | 'end' | Exclude<FrameCheck, 'ok'>;
  /**
   * Whether [endOffset, fileSize) is all zeros, when the scan's last read window held the whole
   * of it (true or false); null when it did not, or when the scan stopped at its count limit (the
   * caller reads it if it needs to know). Lets recovery judge a preallocated tail without reading
   * it a second time.
   */
  restIsZero: boolean | null;
}

/**
 * Validates frames from `startOffset` (expected index `startIndex`) until one fails, the file
 * ends, or `maxCount` frames passed. `onFrame(offset)` is called for each valid frame, in order.
 */
export async function scanFrames(
  handle: FileHandle,
  fileSize: number,
  salt: number,
  startOffset: number,
  startIndex: number,
  maxRecordBytes: number,
  maxCount: number,
  onFrame: (offset: number) => void,
): Promise<ScanResult> {
  let window = new Uint8Array(Math.min(WINDOW_BYTES, Math.max(FRAME_HEADER_BYTES, fileSize - startOffset)));
  let winStart = startOffset;
  let winLen = 0; // valid bytes in the window
  let pos = startOffset;
  let index = startIndex;
  let count = 0;

  const done = (stop: ScanResult['stop']): ScanResult => {
    // Judged only where a caller may need it: past the last valid frame, not after a count limit.
    let restIsZero: boolean | null = null;
    if (pos === fileSize) restIsZero = true;
    else if (stop !== 'limit' && winStart <= pos && winStart + winLen === fileSize && winLen - (pos - winStart) <= ZEROS.length) restIsZero = isZeroBytes(window, pos - winStart, winLen);
    return { count, endOffset: pos, stop, restIsZero };
  };

  const load = async (at: number, need: number): Promise<void> => {
    if (window.length < need) window = new Uint8Array(need);
    winStart = at;
    const want = Math.min(window.length, fileSize - at);
    winLen = want > 0 ? await handle.read(want === window.length ? window : window.subarray(0, want), at) : 0;
  };

  while (count < maxCount) {
    if (pos === fileSize) return done('end');
    if (fileSize - pos < FRAME_HEADER_BYTES) return done('short');
    if (pos + FRAME_HEADER_BYTES > winStart + winLen) await load(pos, FRAME_HEADER_BYTES);
    let at = pos - winStart;
    const len = frameLength(window, at);
    if (len > maxRecordBytes) return done('length');
    const frameBytes = FRAME_HEADER_BYTES + len;
    if (frameBytes > fileSize - pos) return done('short');
    if (pos + frameBytes > winStart + winLen) {
      await load(pos, frameBytes);
      at = 0;
    }
    const check = checkFrame(window.subarray(0, winLen), at, index, salt, maxRecordBytes);
    if (check !== 'ok') return done(check);
    onFrame(pos);
    pos += frameBytes;
    index++;
    count++;
  }
  return done('limit');
}
