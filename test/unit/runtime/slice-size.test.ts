import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  SLICE_MS,
  SLICE_RECORDS_MAX,
  SLICE_RECORDS_MIN,
  SliceSize,
} from '../../../src/runtime/slice-size.js';

test('a slice aims at about 2 ms of processing, within 16 to 1000 records: down at once, up halfway', () => {
  const s = new SliceSize();
  assert.equal(s.records, SLICE_RECORDS_MAX);
  // 1000 records in 20 ms (20 µs each): 100 fit in 2 ms, taken at once.
  s.observe(1000, 20);
  assert.equal(s.records, (SLICE_MS * 1000) / 20);
  // Cheaper records (5 µs): 400 fit; it moves halfway there, then on.
  s.observe(100, 0.5);
  assert.equal(s.records, 250);
  for (let i = 0; i < 20; i++) s.observe(s.records, s.records * 0.005);
  assert.ok(Math.abs(s.records - 400) <= 1, String(s.records));
  // Records cheap again (1 µs): back up to the cap.
  for (let i = 0; i < 20; i++) s.observe(s.records, s.records / 1000);
  assert.equal(s.records, SLICE_RECORDS_MAX);
  // A very slow record (50 ms) does not take the size below the floor.
  s.observe(s.records, s.records * 50);
  assert.equal(s.records, SLICE_RECORDS_MIN);
  // Slices under the floor (a batch of a few records: mostly the per-call cost) are not counted,
  // and an instant slice is no signal to divide by.
  s.observe(3, 5);
  assert.equal(s.records, SLICE_RECORDS_MIN);
  s.observe(SLICE_RECORDS_MIN, 0);
  assert.ok(s.records > SLICE_RECORDS_MIN);
});
