// The SQL endpoint's password check (cumulus/sqlserver.py): Spark's Thrift server runs it
// with hive.server2.authentication=CUSTOM. Users and their PBKDF2-SHA256 hashes are lines
// of the file named by $CUMULUS_SQL_PASSWORDS, as `cumulus sql-server --set-password USER` writes
// them:  user:pbkdf2-sha256:<iterations>:<salt hex>:<hash hex>
// The file is read at every login, so a changed password holds at once.
package cumulus.sqlauth;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.PBEKeySpec;
import javax.security.sasl.AuthenticationException;
import org.apache.hive.service.auth.PasswdAuthenticationProvider;

public class CumulusPasswordAuthenticator implements PasswdAuthenticationProvider {
    static final String ENV = "CUMULUS_SQL_PASSWORDS";

    @Override
    public void Authenticate(String user, String password) throws AuthenticationException {
        String file = System.getenv(ENV);
        if (file == null || file.isEmpty()) {
            throw new AuthenticationException("no password file: $" + ENV + " is not set");
        }
        try {
            for (String line : Files.readAllLines(Path.of(file), StandardCharsets.UTF_8)) {
                String[] f = line.trim().split(":");
                if (f.length == 5 && f[0].equals(user) && f[1].equals("pbkdf2-sha256")) {
                    byte[] salt = HexFormat.of().parseHex(f[3]);
                    byte[] want = HexFormat.of().parseHex(f[4]);
                    PBEKeySpec spec = new PBEKeySpec(
                        (password == null ? "" : password).toCharArray(), salt, Integer.parseInt(f[2]), want.length * 8);
                    byte[] got = SecretKeyFactory.getInstance("PBKDF2WithHmacSHA256").generateSecret(spec).getEncoded();
                    if (MessageDigest.isEqual(got, want)) {
                        return;
                    }
                    break;
                }
            }
        } catch (Exception e) {
            throw new AuthenticationException("password check failed: " + e.getMessage(), e);
        }
        throw new AuthenticationException("wrong user or password for " + user);
    }
}
