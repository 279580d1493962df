/**
 * Which paths of a fresh Chromium profile go into the skeleton every sandbox made ahead gets
 * (src/server/chromium/profile-template.ts `keepInTemplate`): the stores under `Default/`, and
 * nothing a run keeps of its own, at any depth.
 */
import { describe, expect, it } from 'vitest';
import { keepInTemplate } from '../../src/server/chromium/profile-template.js';

describe('keepInTemplate', () => {
  it('keeps the stores under Default/', () => {
    for (const path of [
      'Default/Cookies',
      'Default/History',
      'Default/Web Data',
      'Default/Local Storage',
      'Default/Local Storage/leveldb/CURRENT',
      'Default/Local Storage/leveldb/MANIFEST-000001',
      'Default/Code Cache/js/index-dir/the-real-index',
    ]) {
      expect(keepInTemplate(path), path).toBe(true);
    }
  });

  it('leaves out everything outside Default/, and Default itself', () => {
    for (const path of [
      'Local State',
      'Last Version',
      'Variations',
      'segmentation_platform/ukm_db',
      'GPUPersistentCache/GPUCache/x/cache.db',
      'Default',
      'Profile 1/Cookies',
    ]) {
      expect(keepInTemplate(path), path).toBe(false);
    }
  });

  it('leaves out preferences, sessions, GPU caches, logs, locks and journals at any depth', () => {
    for (const path of [
      'Default/Preferences',
      'Default/Secure Preferences',
      'Default/Sessions/Session_1',
      'Default/Sessions_Encrypted/Tabs_1',
      'Default/Session Storage/CURRENT',
      'Default/GPUCache/index',
      'Default/Cache/Cache_Data/index',
      'Default/DawnGraphiteCache/data_0',
      'Default/Local Storage/leveldb/LOG',
      'Default/Local Storage/leveldb/LOG.old',
      'Default/Local Storage/leveldb/LOCK',
      'Default/Cookies-journal',
      'Default/SingletonLock',
    ]) {
      expect(keepInTemplate(path), path).toBe(false);
    }
  });
});
