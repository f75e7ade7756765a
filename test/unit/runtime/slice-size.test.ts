import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  SLICE_MS,
  SLICE_RECORDS_MAX,
  SLICE_RECORDS_MIN,
  SliceSize,
} from '../../../src/runtime/slice-size.js';

test('a slice aims at about 2 ms of processing, within 16 to 1000 records', () => {
  const s = new SliceSize();
  assert.equal(s.records, SLICE_RECORDS_MAX);
  // 1000 records in 20 ms (20 µs each): 100 fit in 2 ms; it moves halfway there at each slice.
  s.observe(1000, 20);
  assert.equal(s.records, 550);
  for (let i = 0; i < 20; i++) s.observe(s.records, (s.records * 20) / 1000);
  assert.ok(Math.abs(s.records - (SLICE_MS * 1000) / 20) <= 1, String(s.records));
  // Records cheap again (1 µs): back up to the cap.
  for (let i = 0; i < 20; i++) s.observe(s.records, s.records / 1000);
  assert.equal(s.records, SLICE_RECORDS_MAX);
  // A very slow record (50 ms) does not take the size below the floor; an instant one is no signal to divide by.
  for (let i = 0; i < 20; i++) s.observe(s.records, s.records * 50);
  assert.equal(s.records, SLICE_RECORDS_MIN);
  s.observe(0, 5);
  s.observe(10, 0);
  assert.ok(s.records > SLICE_RECORDS_MIN);
});
