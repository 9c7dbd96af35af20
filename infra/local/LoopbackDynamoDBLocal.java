/*
 * DynamoDB Local bound to loopback only (docs/local-stack.md "DynamoDB Local"). The jar's own main
 * (software.amazon.dynamodb.services.local.main.ServerRunner) builds Jetty's Server(port), whose
 * connector listens on every interface, and offers no option to change it. This launcher builds the
 * same server from the same arguments, sets the connector's host before anything is bound, and starts
 * it: the port is never open on another address, not even for a moment.
 *
 * The host is the system property svc.dynamodb.host (default 127.0.0.1). Compiled once by
 * infra/local/dynamodb.ts against the bundled jar.
 */
import java.lang.reflect.Field;
import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class LoopbackDynamoDBLocal {
  public static void main(String[] args) throws Exception {
    String host = System.getProperty("svc.dynamodb.host", "127.0.0.1");
    DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
    Field field = DynamoDBProxyServer.class.getDeclaredField("server");
    field.setAccessible(true);
    Server server = (Server) field.get(proxy);
    Connector[] connectors = server.getConnectors();
    if (connectors.length == 0) throw new IllegalStateException("DynamoDB Local has no connector to bind");
    for (Connector connector : connectors) {
      if (!(connector instanceof ServerConnector)) throw new IllegalStateException("unexpected connector " + connector);
      ((ServerConnector) connector).setHost(host);
    }
    proxy.start();
    System.err.println("DynamoDB Local listens on " + host + " only");
  }
}
