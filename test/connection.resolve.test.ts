/**
 * Where trajflow connects, resolved in one place: the run config's `temporal:` over Temporal's
 * environment configuration (variables over the TOML profile) over the local dev server; each
 * setting says where it came from, and a named TLS file that is not there fails at once. And the
 * data directory's mark, which `trajflow worker` requires.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DataDirNotMarkedError, markDataDir, readDataMarker, requireDataMarker } from '../src/store/dataMarker';
import { connectionOptionsOf, resolveTemporal, TemporalConnectionError } from '../src/temporal/connection';

const dir = mkdtempSync(path.join(os.tmpdir(), 'trajflow-connection-'));
const profileFile = path.join(dir, 'temporal.toml');
writeFileSync(
  profileFile,
  [
    '[profile.default]',
    'address = "profile-host:7233"',
    'namespace = "from-profile"',
    '[profile.cloud]',
    'address = "ns.acct.tmprl.cloud:7233"',
    'namespace = "ns.acct"',
    'api_key = "secret"',
  ].join('\n'),
);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('resolveTemporal', () => {
  it('falls back to the local dev server when nothing is set', () => {
    const target = resolveTemporal({}, {});
    expect(target).toMatchObject({ address: '127.0.0.1:7233', namespace: 'default', origin: { address: 'the local default', namespace: 'the local default' } });
    expect(connectionOptionsOf(target)).toMatchObject({ address: '127.0.0.1:7233', tls: undefined, apiKey: undefined });
  });

  it('takes the config over the variables over the profile', () => {
    const env = { TEMPORAL_CONFIG_FILE: profileFile };
    expect(resolveTemporal({}, env)).toMatchObject({
      address: 'profile-host:7233',
      namespace: 'from-profile',
      origin: { address: 'profile "default" of the Temporal config file' },
    });
    const fromEnv = resolveTemporal({}, { ...env, TEMPORAL_ADDRESS: 'env-host:7233' });
    expect(fromEnv).toMatchObject({ address: 'env-host:7233', namespace: 'from-profile', origin: { address: 'TEMPORAL_ADDRESS' } });
    const fromConfig = resolveTemporal(
      { address: 'config-host:7233', namespace: 'from-config' },
      { ...env, TEMPORAL_ADDRESS: 'env-host:7233', TEMPORAL_NAMESPACE: 'from-env' },
    );
    expect(fromConfig).toMatchObject({
      address: 'config-host:7233',
      namespace: 'from-config',
      origin: { address: 'temporal.address in the run config', namespace: 'temporal.namespace in the run config' },
    });
  });

  it('selects a profile by TEMPORAL_PROFILE or the config, and an API key turns TLS on', () => {
    const cloud = resolveTemporal({}, { TEMPORAL_CONFIG_FILE: profileFile, TEMPORAL_PROFILE: 'cloud' });
    expect(cloud).toMatchObject({ address: 'ns.acct.tmprl.cloud:7233', namespace: 'ns.acct' });
    expect(connectionOptionsOf(cloud)).toMatchObject({ apiKey: 'secret', tls: true });
    expect(resolveTemporal({ profile: 'cloud' }, { TEMPORAL_CONFIG_FILE: profileFile }).address).toBe('ns.acct.tmprl.cloud:7233');
    expect(() => resolveTemporal({ profile: 'nope' }, { TEMPORAL_CONFIG_FILE: profileFile })).toThrow(/Profile 'nope' not found/);
    expect(() => resolveTemporal({}, { TEMPORAL_CONFIG_FILE: `${profileFile}.missing` })).toThrow(`Temporal config file ${profileFile}.missing does not exist`);
  });

  it('names a TLS file that is not there, and a certificate without its key', () => {
    const cert = path.join(dir, 'client.pem');
    const key = path.join(dir, 'client.key');
    expect(() => resolveTemporal({}, { TEMPORAL_TLS_CLIENT_CERT_PATH: cert, TEMPORAL_TLS_CLIENT_KEY_PATH: key })).toThrow(
      new TemporalConnectionError(`TLS client certificate file ${cert} does not exist (TEMPORAL_TLS_CLIENT_CERT_PATH)`),
    );
    writeFileSync(cert, 'PEM');
    expect(() => resolveTemporal({}, { TEMPORAL_TLS_CLIENT_CERT_PATH: cert })).toThrow(/certificate is set without its key/);
    writeFileSync(key, 'PEM');
    const tls = connectionOptionsOf(resolveTemporal({}, { TEMPORAL_TLS_CLIENT_CERT_PATH: cert, TEMPORAL_TLS_CLIENT_KEY_PATH: key }));
    expect(tls.tls).toMatchObject({ clientCertPair: { crt: Buffer.from('PEM'), key: Buffer.from('PEM') } });
  });
});

describe('the data directory mark', () => {
  it('is made once, kept, and required', async () => {
    const dataDir = path.join(dir, 'data');
    await expect(requireDataMarker(dataDir)).rejects.toThrow(DataDirNotMarkedError);
    const first = await markDataDir(dataDir);
    const second = await markDataDir(dataDir);
    expect(first.created).toBe(true);
    expect(second).toEqual({ marker: first.marker, created: false });
    expect(await readDataMarker(dataDir)).toEqual(first.marker);
    await expect(requireDataMarker(dataDir)).resolves.toEqual(first.marker);
  });
});
